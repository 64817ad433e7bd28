/**
 * An error that maps to one HTTP response: `status` plus a JSON body `{"error": message}`.
 *
 * Every failure the bridge produces on purpose is one of these, so the HTTP layer never has to
 * guess a status code and never answers with an empty body (the SRH failure mode that makes
 * `@upstash/redis` throw `UpstashJSONParseError`).
 */
export class HttpError extends Error {
  constructor(
    /** HTTP status to answer with. */
    readonly status: 400 | 401 | 404 | 405 | 500 | 503 | 504,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** 400: the request body or a command in it is not acceptable. */
export function badRequest(message: string): HttpError {
  return new HttpError(400, message);
}
