// Package costcap holds the tests of llmhttp that run on every backend
// (the memory store, DynamoDB Local and redis-server): its cost limit under
// concurrent calls, and the slots in flight of calls that end in every way
// a call can end. It is a package of its own, which no program imports, so
// that the Redis backend its tests need (redisstore, go-redis) is not a
// test dependency of llmhttp: go mod tidy loads the tests of every package
// a program imports, and would download go-redis for every program that
// imports llmhttp.
package costcap
