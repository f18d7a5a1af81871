-- Speculative consumption from KEYS (one request per item), all or none:
-- every item is read (HGETALL) and checked before any is written (one
-- HSET each). Returns {applied, the reason of each request ('' when it
-- could take its amounts), then each item as its fields and values joined
-- by newlines ("" when missing)}: as written when applied, as they were
-- when not.

local flats, sets, ats, out, refused, argi = {}, {}, {}, {0}, false, 0
for r = 1, #KEYS do
  local now, li, nl, ci, nc
  now, li, nl, ci, nc, argi = read_request(ARGV, argi)
  local flat = redis.call('HGETALL', KEYS[r])
  local why, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  flats[r], sets[r], ats[r] = flat, set, at
  out[r + 1] = why
  if why ~= '' then refused = true end
end
if not refused then
  out[1] = 1
  for r = 1, #KEYS do take(KEYS[r], flats[r], sets[r], ats[r]) end
end
for r = 1, #KEYS do
  out[#out + 1] = table.concat(flats[r], '\n')
end
return out
