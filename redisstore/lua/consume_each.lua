-- Speculative consumption from KEYS (one request per item), each request
-- on its own, one after the other, as if each were sent alone: read
-- (HGETALL), check, write (HSET) when it can take its amounts, so a later
-- request on the same item sees an earlier one's write. Returns, per
-- request, three values: applied (1 or 0), the reason ('' when applied)
-- and its item as its fields and values joined by newlines ("" when
-- missing), as written when applied, as it was when not.

local out, argi = {}, 0
for r = 1, #KEYS do
  local now, li, nl, ci, nc
  now, li, nl, ci, nc, argi = read_request(ARGV, argi)
  local flat = redis.call('HGETALL', KEYS[r])
  local why, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  if why == '' then take(KEYS[r], flat, set, at) end
  out[#out + 1] = why == '' and 1 or 0
  out[#out + 1] = why
  out[#out + 1] = table.concat(flat, '\n')
end
return out
