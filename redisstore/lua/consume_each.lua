-- Speculative consumption from KEYS (one request per item, then the hash
-- of the call's write identifier, which is ARGV[1]; see writeid.lua; the
-- requests' arguments follow it), each request on its own, one after the
-- other, as if each were sent alone: read (HGETALL), check,
-- write (HSET) when it can take its amounts, so a later request on the
-- same item sees an earlier one's write. Returns the reply of reply (see
-- consume_lib.lua): each item as written when its request was applied, as
-- it was when not. A call resent after it applied answers the requests it
-- applied as applied (with the items as they are), and decides the others
-- again (nothing of them was written).

local nk, idk = #KEYS - 1, KEYS[#KEYS]
local id = ARGV[1]
local seen, fresh = write_id_seen(idk, id)
seen = seen or ''
local out, flags, applied, argi = {}, {}, false, 1
local li, nl, ci, nc, now
for r = 1, nk do
  now, li, nl, ci, nc, argi = read_request(ARGV, argi, li, nl, ci, nc, now)
  local flat = redis.call('HGETALL', KEYS[r])
  local why = ''
  if byte(seen, r) ~= 49 then -- '1': applied by the call before
    local wf, wv, wi, set, at
    why, wf, wv, wi, set, at = check(ARGV, flat, now, li, nl, ci, nc)
    if why == '' then
      take(KEYS[r], flat, wf, wv, wi, set, at)
      applied = true
    end
  end
  flags[r] = why == '' and '1' or '0'
  reply(out, why == '', why, flat)
end
if applied then write_id_keep(idk, id, table.concat(flags), fresh) end
return table.concat(out, '\n')
