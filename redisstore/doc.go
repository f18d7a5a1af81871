// Package redisstore is a [limiter.Repository] on Redis.
package redisstore
