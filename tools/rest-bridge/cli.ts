/**
 * `tsx tools/rest-bridge/cli.ts --redis-port 6379 [--redis-host 127.0.0.1] [--port 8080]
 *   [--host 127.0.0.1] [--token T] [--allow-admin-commands] [--verbose]`
 *
 * Runs one bridge in front of an already running redis-server until Ctrl-C / SIGTERM. The token
 * comes from --token, else $BRIDGE_TOKEN, else a random one (printed). Administration commands
 * (SHUTDOWN, CONFIG, DEBUG, …) are refused unless --allow-admin-commands is given.
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { startBridge } from "./bridge.js";

function usage(): never {
  process.stderr.write(
    "usage: tsx tools/rest-bridge/cli.ts --redis-port N [--redis-host H] [--port N] [--host H] [--token T] [--allow-admin-commands] [--verbose]\n",
  );
  process.exit(2);
}

function toPort(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    process.stderr.write(`--${name} must be a port number, got ${value}\n`);
    usage();
  }
  return port;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      "redis-port": { type: "string" },
      "redis-host": { type: "string", default: "127.0.0.1" },
      port: { type: "string", default: "0" },
      host: { type: "string", default: "127.0.0.1" },
      token: { type: "string" },
      "allow-admin-commands": { type: "boolean", default: false },
      verbose: { type: "boolean", short: "v", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const redisPort = toPort(values["redis-port"], "redis-port");
  if (values.help || redisPort === undefined) usage();
  const token = values.token ?? process.env.BRIDGE_TOKEN ?? randomBytes(32).toString("hex");

  const bridge = await startBridge({
    redisHost: values["redis-host"],
    redisPort,
    token,
    host: values.host,
    port: toPort(values.port, "port") ?? 0,
    allowAdminCommands: values["allow-admin-commands"],
    ...(values.verbose ? { log: (message: string) => process.stderr.write(`${message}\n`) } : {}),
  });
  process.stdout.write(`bridge listening: url=${bridge.url} token=${token}\npress Ctrl-C to stop\n`);

  const stop = async () => {
    await bridge.close();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}

main().catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
