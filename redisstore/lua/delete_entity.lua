-- Deletes an entity's record and stored configs. KEYS: the entity, its
-- config-resource set, its parent's children set, the set of resources
-- with entity configs, then the config key and the entity set of each
-- resource in ARGV[2..]. ARGV[1] is the entity id. Returns how many
-- records were deleted.
local n = redis.call('DEL', KEYS[1])
if n == 1 then redis.call('SREM', KEYS[3], ARGV[1]) end
local k = 5
for i = 2, #ARGV do
  local resource = ARGV[i]
  n = n + redis.call('DEL', KEYS[k])
  redis.call('ZREM', KEYS[k + 1], ARGV[1])
  if redis.call('ZCARD', KEYS[k + 1]) == 0 then redis.call('SREM', KEYS[4], resource) end
  k = k + 2
end
redis.call('DEL', KEYS[2])
return n
