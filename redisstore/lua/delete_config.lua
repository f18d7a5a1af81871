-- Deletes a config and its index entries; the KEYS and ARGV of
-- put_config.lua without the config. Returns 1 when it existed.
local n = redis.call('DEL', KEYS[1])
if ARGV[2] == 'e' then
  redis.call('ZREM', KEYS[2], ARGV[4])
  if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('SREM', KEYS[3], ARGV[3]) end
  redis.call('SREM', KEYS[4], ARGV[3])
elseif ARGV[2] == 'r' then
  redis.call('SREM', KEYS[2], ARGV[3])
end
return n
