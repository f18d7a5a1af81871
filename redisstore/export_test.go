package redisstore

import "github.com/zaelimiter/limiter"

// BucketKeyName returns the Redis key of a bucket item.
func (s *Store) BucketKeyName(k limiter.BucketKey) string { return s.keys.bucket(k) }
