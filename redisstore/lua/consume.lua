-- Speculative consumption from KEYS (one request per item), all or none:
-- every item is read (HGETALL) and checked before any is written (one
-- HSET each). Returns the reply of reply (see consume_lib.lua): every
-- request applied or none, each item as written when applied, as it was
-- when not.

if #KEYS == 1 then -- the common case, without the tables of many
  local now, li, nl, ci, nc = read_request(ARGV, 0)
  local flat = redis.call('HGETALL', KEYS[1])
  local why, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  if why == '' then take(KEYS[1], flat, set, at) end
  return (why == '' and '1\n' or '0\n') .. why .. '\n' .. decimal(#flat) .. '\n' .. table.concat(flat, '\n')
end
local flats, sets, ats, whys, refused, argi = {}, {}, {}, {}, false, 0
for r = 1, #KEYS do
  local now, li, nl, ci, nc
  now, li, nl, ci, nc, argi = read_request(ARGV, argi)
  local flat = redis.call('HGETALL', KEYS[r])
  local why, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  flats[r], sets[r], ats[r], whys[r] = flat, set, at, why
  if why ~= '' then refused = true end
end
local out = {}
for r = 1, #KEYS do
  if not refused then take(KEYS[r], flats[r], sets[r], ats[r]) end
  reply(out, not refused, whys[r], flats[r])
end
return table.concat(out, '\n')
