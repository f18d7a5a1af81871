-- Store.Allow with the token bucket (see allow_tb.lua) on each of KEYS,
-- one after the other, with five ARGV each: now, capacity, refill amount,
-- refill period, tokens requested. Returns three integers per key.
local out = {}
for r = 1, #KEYS do
  local a = 5 * (r - 1)
  local x = allow_token_bucket(KEYS[r], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  out[#out + 1], out[#out + 2], out[#out + 3] = x[1], x[2], x[3]
end
return out
