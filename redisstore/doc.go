// Package redisstore is a [store.Repository] on Redis (go-redis v9): for
// services that run Redis rather than DynamoDB. A program written for the
// DynamoDB repository runs unchanged on it; only the constructor differs:
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	repo, err := redisstore.New(client)
//	rl := limiter.New(repo)
//
// It builds on package store (the backend contract) alone, not on the
// limiter, and passes the conformance suite (package storetest) on a
// standalone redis-server and on a Redis Cluster. Besides [store.Repository] it
// implements [store.SpeculativeStore], [store.BatchStore] (so that
// [github.com/zaelimiter/limiter.RateLimiter.AcquireAll] costs one round trip),
// [store.AuditLog] and [store.ConfigLister]. Group commit and the
// over-limit cache are the limiter's and work unchanged.
//
// # One Lua call per bucket operation
//
// Every bucket operation is one call of the store's Lua code, so one round
// trip, atomic on the server: the speculative consume of an acquire
// (conditioned on the resolved limit parameters, no refill: the limiter
// refills), the read-then-write path's write (conditions of every item
// checked before any is written, so a cascade's child and parent apply
// together or not at all), commits and rollbacks (a refund never lifts a
// balance above its capacity), limit changes, and resets.
//
// The code is one Redis 7 function library, loaded with FUNCTION LOAD and
// called with FCALL, so that it is defined once per server rather than on
// every call. Its name holds a hash of its code: stores of different
// versions on one server call their own functions. The store loads it when
// a call finds it missing (the first call, or after the server restarted,
// failed over to an empty replica or flushed its functions), on every
// master of a Cluster. Where the server offers no functions (Redis 6, or a
// service that renames or forbids FUNCTION or FCALL), the store turns to
// scripts for good, one per operation, run with EVALSHA and sent again with
// EVAL when the server answers NOSCRIPT; [Options.DisableFunctions] starts
// with scripts. [Store.ScriptReloads] counts the loads and the scripts
// sent again.
//
// # Batching under concurrency
//
// Under concurrency an acquire's cost on Redis is the round trip more than
// the script. The store keeps at most two speculative consume scripts in
// flight per slot (all keys on a standalone server, one resource's buckets
// on a Cluster); the requests that arrive meanwhile queue, and when a
// script returns, the queue goes as one script (up to 64 requests), in
// which each request is decided on its own, one after the other, exactly
// as if it had been sent alone (a later request on the same bucket sees an
// earlier one's write). Uncontended, a request goes at once. A queued
// request whose context ends before it is sent returns at once and takes
// nothing; once sent, it waits for its result. No goroutine is started:
// the first queued caller sends the batch. This does across keys what the
// limiter's group commit does for one key.
//
// Redis runs Lua 5.1, whose numbers are doubles, exact only below 2^53.
// The scripts keep every balance, counter and time as a decimal string.
// They compute on numbers, checking that every operand, sum and product
// stays below 2^53, and redo a computation on arbitrary-precision integers
// only when one would not; the results are the same either way. The
// limiter's bucket math (refill with drift compensation, consume,
// retry-after, 128-bit intermediates, results saturated to int64) is also
// implemented in Lua, for [Store.Allow]; the golden vectors of the
// limiter's bucket math pass through both paths unchanged.
//
// # Layout
//
// All (entity, resource) limits live in one hash (the composite bucket):
// field "h" holds "rf|sc|cas|ttl|par" (refill timestamp, shard count,
// cascade, expiry time, parent id) and field "l:NAME" holds
// "cp|ra|rp|tk|tc" (capacity, refill amount, refill period, balance, total
// consumed) in millitokens and milliseconds. Entities, stored limits,
// their listings and the audit log (a sorted set per entity, in ULID order)
// are hashes, strings and sets under the namespace's keys. Keys start with
// [Options.Prefix], and stores with different [Options.Namespace] share
// nothing.
//
// # Redis Cluster: which keys share a slot
//
// Multi-key scripts need all their keys in one slot. The bucket items of a
// resource share the hash tag {namespace:resource}, so a cascade (child and
// parent on one resource) is one atomic script, and different resources
// spread over the masters. The administrative keys share the tag
// {namespace}: one slot, whose scripts are atomic. The trade-off: all
// buckets of one resource are served by one master, so a single very busy
// resource does not scale out (group commit takes most of a hot key's
// load, see docs/usage.md); in exchange no cascade needs compensation. The
// only writes that span slots are AcquireAll batches over several
// resources: they run one script per resource, in order, and when a later
// one is refused the earlier ones are given back (capped refunds), as the
// DynamoDB backend gives back a cascade's child when its parent refuses.
// In that window a concurrent request on an earlier resource may be
// refused that would have fit; nothing is ever admitted twice. On a
// standalone server (or behind Sentinel) every batch is one script.
//
// Entity-wide limits (limiter.AllResources) make every acquire of an
// entity such a batch: its resource's buckets and the entity's
// entity-wide bucket, resource "*" (and a calendar or prepaid limit's
// own bucket, "{resource}/{limit}.{tag}", is a resource of its own too).
// With the tags above these span slots: the batch is given back as
// described, never over-admitting but refusing, under contention, calls
// that would have fit. [Options.SingleSlot] makes them meet: every bucket
// item of the namespace (with its write identifiers and top-up ids) takes
// the hash tag {namespace}, so that every batch, whatever it spans, is
// one atomic script on one master. The price is that one master serves
// the namespace's buckets: spread a large service over namespaces (one
// per tenant group, say). SingleSlot changes the keys of the bucket
// items, so set it before the first write and on every store of the
// namespace.
//
// # Expiry
//
// The limiter gives buckets of default (resource or system) limits a TTL,
// and the period buckets of calendar limits.
// The store keeps it in the item (on the limiter's clock, which decides
// expiry) and also sets the key's Redis lifetime to the same duration
// relative to the write (PEXPIRE, not EXPIREAT: the limiter's clock need
// not be the server's), so an idle bucket disappears from Redis.
//
// # Unavailability
//
// Errors of the server or the connection (connection refused, timeouts,
// a restart, LOADING) are returned wrapped in [store.ErrUnavailable], and
// the limiter answers them with its on-unavailable mode: block fails the
// acquire with a *[github.com/zaelimiter/limiter.UnavailableError], allow returns a no-op lease
// (the fail-closed and fail-open of other throttles). The caller's context
// errors are returned as they are.
//
// The limiter bounds each call ([github.com/zaelimiter/limiter.Options]) with a
// context deadline, which go-redis honours only on a client with
// ContextTimeoutEnabled set: set it. Otherwise the client's ReadTimeout
// and WriteTimeout (3 s by default) bound a call to a server that stopped
// answering; a caller with a deadline still gets its answer before it,
// and the call goes on in the background until the client gives up.
//
// go-redis resends a command whose connection broke before the reply (its
// MaxRetries, 3 by default), after the script may have run. Every call
// that changes balances (a consume, batched or not, and a write) therefore
// carries an identifier drawn at random per call, and names the hash, in
// the slot of its items, that keeps the identifiers of the calls sent in
// the same tenth of a second (by the client's clock): a call that applied
// leaves its identifier there, holding what it applied, and the same call
// sent again (the same hash, the same identifier) finds it and answers
// from it instead of applying again, so a dropped reply costs a retry,
// not a double charge. The hash expires 10.2 s after its first call, so
// every identifier is kept for at least 10 s (less the difference of two
// clients' clocks, when they disagree); an identifier is a field, not a
// key (no key created and no expiry per call), about 60 bytes of Redis
// memory: at 10,000 calls a second, about 6 MB. A call whose every attempt
// failed may still have run on the server: the limiter reports it as
// unavailable, and what it took stays taken. [Store.Allow]'s calls carry
// no identifier: a resent one may count twice.
//
// A [github.com/redis/go-redis/v9.Client] whose retries are off
// (MaxRetries: -1) sends each command once, so its calls carry no
// identifier and record none: an applied consume is then two commands on
// the server (HGETALL and HSET) instead of three, and a dropped reply is
// an error, as when every attempt failed. A Cluster or Ring client moves
// a command to another node after a broken connection, so its calls
// always carry one. A hook (redis.Hook) that sends a command again itself
// must leave retries on.
//
// # Differences from the DynamoDB backend
//
//   - No write sharding ([store.ShardStore]): Redis has no per-key write
//     ceiling like DynamoDB's partitions, so there is no hidden write
//     capacity limit either.
//   - No usage snapshots or capacity reports (no stream, no aggregator):
//     those calls return errors matching [store.ErrUnsupported].
//   - DeleteEntity deletes the entity's record and configs in one script
//     and its buckets resource by resource (DynamoDB's is not atomic
//     either).
//
// # A throttle for single-limit keys
//
// [Store.Allow] is a plain throttle (no leases, entities or stored limits)
// on keys of their own, with the token bucket or GCRA
// ([Options.Algorithm]). Under concurrency, on a standalone server, the
// calls queued behind two in flight go to the server together, each
// decided alone.
package redisstore
