/**
 * A JSON answer that the route serialises itself. For a returned object, Elysia cleans it to the
 * route's response schema and checks it again on every request (the compiled `Clean` and `Check`,
 * about 5 % of the API's CPU for a contact GET; the check alone 3.4 % in the profile of
 * bench/findings/2026-11-26-get-cpu-api-vs-baseline.md); a Response passes through untouched. Only
 * for bodies built field by field to their schema (toContact), whose shapes the contract tests
 * check; the route keeps its response schema for the OpenAPI document. Same headers as Elysia's
 * own answer for an object (Response.json).
 */
export function jsonResponse(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}
