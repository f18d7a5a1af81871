-- Stores a config and indexes it. KEYS: the config, then for an entity
-- config its resource's entity set, the set of resources with entity
-- configs and the entity's config-resource set; for a resource config the
-- set of resources with defaults. ARGV: the config (JSON), level
-- ('e', 'r', 's'), resource, entity id.
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] == 'e' then
  redis.call('ZADD', KEYS[2], 0, ARGV[4])
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('SADD', KEYS[4], ARGV[3])
elseif ARGV[2] == 'r' then
  redis.call('SADD', KEYS[2], ARGV[3])
end
return 1
