-- Speculative consumption from KEYS (one request per item), all or none:
-- every item is read (HGETALL) and checked before any is written (one
-- HSET each). Returns the reply of reply (see consume_lib.lua): every
-- request applied or none, each item as written when applied, as it was
-- when not.

if #KEYS == 1 then -- the common case, without the tables of many
  local now, li, nl, ci, nc = read_request(ARGV, 0)
  local flat = redis.call('HGETALL', KEYS[1])
  local why, wf, wv, wi, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  local pre
  if why == '' then
    take(KEYS[1], flat, wf, wv, wi, set, at)
    pre = '1\n\n'
  else
    pre = '0\n' .. why .. '\n'
  end
  -- The reply in one concatenation (one new string) for an item of one or
  -- two limits.
  local n = #flat
  if n == 4 then
    return pre .. '4\n' .. flat[1] .. '\n' .. flat[2] .. '\n' .. flat[3] .. '\n' .. flat[4]
  elseif n == 6 then
    return pre .. '6\n' .. flat[1] .. '\n' .. flat[2] .. '\n' .. flat[3] .. '\n' .. flat[4] .. '\n' .. flat[5] .. '\n' .. flat[6]
  end
  return pre .. decimal(n) .. '\n' .. table.concat(flat, '\n')
end
local flats, checked, refused, argi = {}, {}, false, 0
for r = 1, #KEYS do
  local now, li, nl, ci, nc
  now, li, nl, ci, nc, argi = read_request(ARGV, argi)
  local flat = redis.call('HGETALL', KEYS[r])
  local c = {check(ARGV, flat, now, li, nl, ci, nc)}
  flats[r], checked[r] = flat, c
  if c[1] ~= '' then refused = true end
end
local out = {}
for r = 1, #KEYS do
  local c = checked[r]
  if not refused then take(KEYS[r], flats[r], c[2], c[3], c[4], c[5], c[6]) end
  reply(out, not refused, c[1], flats[r])
end
return table.concat(out, '\n')
