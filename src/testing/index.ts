/**
 * `edge-redlock/testing`: in-memory Redis nodes to run edge-redlock against in your own unit tests,
 * with no server and no network. They understand every command and script the library sends, and a
 * differential test keeps them answering as a real redis-server does.
 * @module edge-redlock/testing
 */

export type { MemoryNode, MemoryNodeOptions } from "./memory-node.js";
export { memoryNode, memoryNodes } from "./memory-node.js";
