-- Speculative consumption from KEYS (one request per item), each request
-- on its own, one after the other, as if each were sent alone: read
-- (HGETALL), check, write (HSET) when it can take its amounts, so a later
-- request on the same item sees an earlier one's write. Returns the reply
-- of reply (see consume_lib.lua): each item as written when its request
-- was applied, as it was when not.

local out, argi = {}, 0
for r = 1, #KEYS do
  local now, li, nl, ci, nc
  now, li, nl, ci, nc, argi = read_request(ARGV, argi)
  local flat = redis.call('HGETALL', KEYS[r])
  local why, wf, wv, wi, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  if why == '' then take(KEYS[r], flat, wf, wv, wi, set, at) end
  reply(out, why == '', why, flat)
end
return table.concat(out, '\n')
