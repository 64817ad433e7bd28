/**
 * Entry of the Vercel Edge sandbox bundle (see edge.test.ts): the built library and the portable
 * suite behind a `fetch` event listener, the way edge-runtime serves a function.
 */
import * as lib from "../edge-redlock.js";
import { suiteHandler } from "../suite-handler.js";

interface FetchEvent extends Event {
  readonly request: Request;
  respondWith(response: Promise<Response>): void;
}

const handle = suiteHandler(lib);

addEventListener("fetch", (event) => {
  const fetchEvent = event as FetchEvent;
  fetchEvent.respondWith(handle(fetchEvent.request));
});
