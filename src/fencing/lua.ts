/**
 * Lua shared by the fencing scripts (`src/scripts/fence-*.ts`). Each script's source is this
 * prelude followed by its own body, so every script is self-contained on the server, and its
 * SHA-1 covers the prelude too.
 *
 * Conventions every fencing script follows:
 * - KEYS[1..4] are the namespace's fencing keys (see `src/fencing/keys.ts`): incarnation marker,
 *   quarantine, counters hash, repairs hash. Lock keys, when any, follow from KEYS[5].
 * - The reply is always an array of three strings `{status, fence, incarnation}`: a short status
 *   word, a fence counter as a canonical decimal integer string, and the node's incarnation id
 *   ("" when it has none). Counters travel as strings both ways because Lua numbers are doubles
 *   and `tostring` of a large double prints an exponent; the scripts compare with `tonumber`
 *   (exact below 2^53) but only ever store and return the strings they were given.
 * - A value the scripts did not write themselves (a corrupt counter or marker) raises an error:
 *   the client sees a node error, never a vote.
 * @module
 */

/** Largest fence counter: 2^53 - 1, the largest integer a Lua double and a JS number hold exactly. */
export const MAX_FENCE = Number.MAX_SAFE_INTEGER;

/**
 * `counter(field)`: the counter of one resource as (number, canonical string), 0 when absent.
 * `highest(fields)`: the largest counter over the fields, as (number, string).
 * `health(fields)`: whether the node may take part for these resources:
 *   NO_MARKER (no incarnation marker), QUARANTINED (quarantine key present), NEEDS_REPAIR (a
 *   recovering node without a repair stamp of its current incarnation for some resource) or OK;
 *   plus the incarnation id.
 * `canonical(text)`: whether text is a canonical integer in [0, 2^53 - 1].
 */
export const FENCE_LUA_PRELUDE = `local function canonical(text)
if type(text) ~= "string" or #text > 16 then return false end
if text ~= "0" and not string.match(text, "^[1-9]%d*$") then return false end
return tonumber(text) <= 9007199254740991
end
local function counter(field)
local text = redis.call("HGET", KEYS[3], field)
if not text then return 0, "0" end
if not canonical(text) then error("edge-redlock: corrupt fence counter") end
return tonumber(text), text
end
local function highest(fields)
local best, text = 0, "0"
for _, field in ipairs(fields) do
local n, t = counter(field)
if n > best then best, text = n, t end
end
return best, text
end
local function health(fields)
local marker = redis.call("GET", KEYS[1])
if not marker then return "NO_MARKER", "" end
local state, id = string.match(marker, "^(%l+):(%x+)$")
if state ~= "ok" and state ~= "recovering" then error("edge-redlock: corrupt incarnation marker") end
if redis.call("EXISTS", KEYS[2]) == 1 then return "QUARANTINED", id end
if state == "recovering" then
for _, field in ipairs(fields) do
if redis.call("HGET", KEYS[4], field) ~= id then return "NEEDS_REPAIR", id end
end
end
return "OK", id
end
`;
