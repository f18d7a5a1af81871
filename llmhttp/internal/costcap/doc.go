// Package costcap holds the test of llmhttp's cost limit under concurrent
// calls on every backend: the memory store, DynamoDB Local and
// redis-server. It is a package of its own, which no program imports, so
// that the Redis backend its test needs (redisstore, go-redis) is not a
// test dependency of llmhttp: go mod tidy loads the tests of every package
// a program imports, and would download go-redis for every program that
// imports llmhttp.
package costcap
