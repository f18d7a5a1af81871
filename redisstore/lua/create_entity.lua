-- Creates an entity unless it exists. KEYS: the entity, its parent's
-- children set. ARGV: id, name, parent, cascade, metadata (JSON), created.
-- Returns 1, or 0 when the entity exists.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'par', ARGV[3], 'cas', ARGV[4],
  'md', ARGV[5], 'created', ARGV[6])
if ARGV[3] ~= '' then redis.call('SADD', KEYS[2], ARGV[1]) end
return 1
