-- Speculative consumption from KEYS (one request per item, then the hash
-- of the call's write identifier, which is ARGV[1]; see writeid.lua), all
-- or none: every item is read (HGETALL) and checked before any is written
-- (one HSET each), and the identifier is recorded or looked up once the
-- call is decided. The requests' arguments follow the identifier.
-- Returns the reply of reply (see consume_lib.lua): every request applied
-- or none, each item as written when applied, as it was when not. A call
-- resent after it applied answers applied, with the items as they are.

local nk, idk = #KEYS - 1, KEYS[#KEYS]
local id = ARGV[1]
if nk == 1 then -- the common case, without the tables of many
  local flat = redis.call('HGETALL', KEYS[1])
  local now, li, nl, ci, nc = read_request(ARGV, 1)
  local why, wf, wv, wi, set, at = check(ARGV, flat, now, li, nl, ci, nc)
  local pre
  if why == '' then
    -- applied, unless this call applied before (then as it is)
    if not write_id_claim(idk, id) then take(KEYS[1], flat, wf, wv, wi, set, at) end
    pre = '1\n\n'
  elseif write_id_applied(idk, id) then
    pre = '1\n\n'
  else
    pre = '0\n' .. why .. '\n'
  end
  return item_lines(pre, flat)
end
local flats, checked, refused, argi = {}, {}, false, 1
local li, nl, ci, nc, now
for r = 1, nk do
  now, li, nl, ci, nc, argi = read_request(ARGV, argi, li, nl, ci, nc, now)
  local flat = redis.call('HGETALL', KEYS[r])
  local c = {check(ARGV, flat, now, li, nl, ci, nc)}
  flats[r], checked[r] = flat, c
  if c[1] ~= '' then refused = true end
end
-- applied, unless this call applied before (then every item as it is)
local seen
if refused then
  seen = write_id_applied(idk, id)
else
  seen = write_id_claim(idk, id)
end
local out = {}
for r = 1, nk do
  local c = checked[r]
  if seen then
    reply(out, true, '', flats[r])
  else
    if not refused then take(KEYS[r], flats[r], c[2], c[3], c[4], c[5], c[6]) end
    reply(out, not refused, c[1], flats[r])
  end
end
return table.concat(out, '\n')
