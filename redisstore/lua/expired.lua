-- expired reports whether an item's expiry time (epoch s) has passed at
-- now (epoch ms).
local function expired(ttl, now)
  if not ttl or ttl == '0' then return false end
  if small(ttl) and small(now) then
    return tonumber(ttl) <= math.floor(tonumber(now) / 1000)
  end
  local z = big()
  return z.bcmp(z.parse(ttl), (z.bdivmod(z.parse(now), z.parse('1000')))) <= 0
end

