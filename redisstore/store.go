package redisstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/zaelimiter/limiter/store"
)

// Defaults of [Options].
const (
	DefaultPrefix    = "zael:"
	DefaultNamespace = "default"
)

// Options configures [New]. New fills every field with its default before
// calling the option functions.
type Options struct {
	// Prefix starts every key the store writes. Default "zael:".
	Prefix string
	// Namespace scopes the store's data, like a DynamoDB namespace: stores
	// on one server with different namespaces share nothing. Default
	// "default".
	Namespace string
	// Now is the clock of [Store.Allow]. Nil means time.Now. The
	// repository methods never read a clock: they use the times the
	// limiter passes.
	Now func() time.Time
	// Algorithm is the algorithm of [Store.Allow]: [TokenBucket] (the
	// default) or [GCRA].
	Algorithm Algorithm
	// DisableFunctions runs the store's Lua code as scripts (EVALSHA)
	// even where the server offers Redis 7 functions. Without it the store
	// loads its function library once per server and calls it with FCALL,
	// and turns to scripts by itself on a server without functions.
	DisableFunctions bool
	// SingleSlot puts every bucket item of the namespace in one Cluster
	// slot (hash tag {namespace}), instead of one slot per resource
	// ({namespace:resource}), so that every batch, whatever resources it
	// spans, is one atomic script: an acquire that charges an entity-wide
	// bucket (limiter.AllResources) or a calendar or prepaid limit's
	// bucket beside its resource's. The cost: one master serves all the
	// namespace's buckets (spread the load over namespaces instead). It
	// changes the keys of the bucket items: set it before the first
	// write, and on every store of the namespace. On a standalone server
	// every batch is one script either way.
	SingleSlot bool
}

// Store is a [store.Repository] on Redis. It is safe for concurrent use.
// The zero value is not usable; call [New].
type Store struct {
	client  redis.UniversalClient
	sharded bool // the client spreads keys over several servers (Cluster, Ring)
	// resends is whether the client may send a call again after it ran
	// (see resends): only then do calls carry write identifiers.
	resends bool
	opts    Options
	keys    keyspace

	// knownResources caches the resources already recorded in the bucket
	// resource index (DeleteEntity reads it).
	knownResources sync.Map

	// limitArgs keeps the consume function's arguments of the limits used
	// lately, one a slot (see limitArgsOf).
	limitArgs [limitArgsSlots]atomic.Pointer[keptLimitArgs]
	// writeIDKeys keeps the key of the write identifiers' hash of the
	// resources used lately (see writeIDKeyOf).
	writeIDKeys [writeIDKeySlots]atomic.Pointer[writeIDKey]

	reloads atomic.Int64 // library loads and scripts sent again after NOSCRIPT
	mode    atomic.Int32 // modeFunctions or modeScripts
	loads   singleflight.Group

	consumes       batcher[store.SpeculativeRequest, store.SpeculativeResult]
	allows         batcher[allowReq, AllowResult]
	batches        atomic.Int64 // consume scripts sent for queued requests
	batchedConsume atomic.Int64 // the requests in them
	allowBatches   atomic.Int64 // Allow calls sent for queued requests
}

var (
	_ store.Repository       = (*Store)(nil)
	_ store.SpeculativeStore = (*Store)(nil)
	_ store.BatchStore       = (*Store)(nil)
	_ store.AuditLog         = (*Store)(nil)
	_ store.ConfigLister     = (*Store)(nil)
)

// New returns a store on client: a *redis.Client (a standalone server, or
// Sentinel through redis.NewFailoverClient) or a *redis.ClusterClient. It
// does not contact the server.
func New(client redis.UniversalClient, optFns ...func(*Options)) (*Store, error) {
	o := Options{Prefix: DefaultPrefix, Namespace: DefaultNamespace}
	for _, fn := range optFns {
		fn(&o)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for field, v := range map[string]string{"namespace": o.Namespace, "prefix": o.Prefix} {
		if strings.ContainsAny(v, "{}") || (field == "namespace" && v == "") {
			return nil, &store.ValidationError{Field: field, Value: v, Reason: "must be non-empty (namespace) and hold no braces"}
		}
	}
	_, standalone := client.(*redis.Client)
	s := &Store{
		client:  client,
		sharded: !standalone,
		resends: resends(client),
		opts:    o,
		keys:    keyspace{prefix: o.Prefix, ns: o.Namespace, single: o.SingleSlot},
	}
	if o.DisableFunctions {
		s.mode.Store(modeScripts)
	}
	s.consumes = batcher[store.SpeculativeRequest, store.SpeculativeResult]{op: "consume", one: s.consumeOne, many: s.consumeEach}
	s.allows = batcher[allowReq, AllowResult]{op: "allow", one: s.allowOne, many: s.allowMany}
	return s, nil
}

// Name implements [store.Repository]: "redis".
func (s *Store) Name() string { return "redis" }

// Namespace returns the store's namespace.
func (s *Store) Namespace() string { return s.opts.Namespace }

// Client returns the client the store uses.
func (s *Store) Client() redis.UniversalClient { return s.client }

// ScriptReloads returns how many times the store sent its Lua code to the
// server since it was created: loads of its function library (the first
// call, and after the server restarted, failed over or flushed its
// functions) and, in script mode, scripts sent again because the server
// answered NOSCRIPT.
func (s *Store) ScriptReloads() int64 { return s.reloads.Load() }

// Ping reports whether the server answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap("ping", s.client.Ping(ctx).Err())
}

// keyspace builds the store's keys. Administrative records (entities,
// configs, their indexes, audit events) share the hash tag {ns}: one slot
// on a Cluster, so that their scripts are atomic. The bucket items of a
// resource share the hash tag {ns:resource}: a cascade (child and parent on
// one resource) is one script in one slot, and the resources of a service
// spread over the cluster. With Options.SingleSlot the bucket items of
// every resource share the tag {ns} (their keys go on with ":@" and the
// resource, which no administrative key does).
type keyspace struct {
	prefix, ns string
	single     bool
}

// slot is the start of the keys of resource's bucket items, their
// write identifiers and top-up ids: the prefix and the hash tag.
func (k keyspace) slot(resource string) string {
	if k.single {
		return k.prefix + "{" + k.ns + "}:@" + resource
	}
	return k.prefix + "{" + k.ns + ":" + resource + "}"
}

func (k keyspace) admin(parts ...string) string {
	return k.prefix + "{" + k.ns + "}:" + strings.Join(parts, ":")
}

// bucket is the key of a bucket item. Its hash tag, {ns:resource}, puts the
// items of a resource in one Cluster slot.
func (k keyspace) bucket(key store.BucketKey) string {
	// spelled out (slot's keys), so that the key is one concatenation
	if k.single {
		return k.prefix + "{" + k.ns + "}:@" + key.Resource + ":b:" + key.EntityID + ":" + strconv.Itoa(key.Shard)
	}
	return k.prefix + "{" + k.ns + ":" + key.Resource + "}:b:" + key.EntityID + ":" + strconv.Itoa(key.Shard)
}

// resends reports whether client may send a command again after the
// server ran it: go-redis resends a command whose connection broke before
// the reply, up to MaxRetries times (3 by default), and a Cluster or Ring
// client also moves a command to another node on such an error. Only a
// standalone client whose retries are off (MaxRetries -1, which go-redis
// turns into 0) sends each command once, whatever happens to its reply.
func resends(client redis.UniversalClient) bool {
	c, ok := client.(*redis.Client)
	return !ok || c.Options().MaxRetries > 0
}

// writeID returns a new write identifier (see lua/writeid.lua), a random
// name drawn per call, and the key of the hash that keeps it, in the slot
// of resource's bucket items: one hash per tenth of a second of the
// client's clock, which a resent call names again (go-redis resends the
// same arguments). The key of a resource's current tenth of a second is
// kept (see writeIDKeyOf), so that a call allocates only its identifier.
// On a client that never resends (s.resends is false) the identifier is
// empty and the key is item, the key of one of the call's items (in the
// same slot): the script then records nothing, and a call costs no
// command and no clock reading for it.
func (s *Store) writeID(resource, item string) (key, id string) {
	if !s.resends {
		return item, ""
	}
	tick := time.Now().UnixMilli() / 100
	var buf [16]byte
	id = string(strconv.AppendUint(buf[:0], rand.Uint64(), 36))
	return s.writeIDKeyOf(resource, tick), id
}

// writeIDKey is the key of the write identifiers' hash of a resource's
// tenth of a second, in a slot of Store.writeIDKeys.
type writeIDKey struct {
	tick          int64
	resource, key string
}

// writeIDKeySlots is the size of Store.writeIDKeys.
const writeIDKeySlots = 64

// writeIDKeyOf returns the key of the write identifiers' hash of resource
// for tick (a tenth of a second), kept in resource's slot of
// s.writeIDKeys (picked by a hash of its name) until the tick passes.
func (s *Store) writeIDKeyOf(resource string, tick int64) string {
	slot := &s.writeIDKeys[maphash.String(limitArgsSeed, resource)%writeIDKeySlots]
	if e := slot.Load(); e != nil && e.tick == tick && e.resource == resource {
		return e.key
	}
	key := s.keys.slot(resource) + ":w:" + strconv.FormatInt(tick, 36)
	slot.Store(&writeIDKey{tick: tick, resource: resource, key: key})
	return key
}

func (k keyspace) entity(id string) string        { return k.admin("e", id) }
func (k keyspace) children(id string) string      { return k.admin("kids", id) }
func (k keyspace) entityConfigs(id string) string { return k.admin("econf", id) }
func (k keyspace) bucketResources() string        { return k.admin("bres") }
func (k keyspace) defaults() string               { return k.admin("defaults") }
func (k keyspace) configResources() string        { return k.admin("ecfgres") }
func (k keyspace) configEntities(resource string) string {
	return k.admin("ecfg", resource)
}
func (k keyspace) audit(entityID string) string { return k.admin("audit", entityID) }

// topUp is the key of the id of a top-up of the balance bucket key, in
// its slot. Identifiers hold no '#', which separates the entity from the
// id.
func (k keyspace) topUp(key store.BucketKey, id string) string {
	return k.slot(key.Resource) + ":t:" + key.EntityID + "#" + id
}

// throttle is the key of Store.Allow's state of key under algorithm kind;
// each key has a hash tag of its own, so keys spread over a Cluster.
func (k keyspace) throttle(key, kind string) string {
	return k.prefix + "{" + k.ns + ":k:" + key + "}:" + kind
}

// config returns the key of a stored config. Resources hold no ':', so the
// entity id (which may) comes last.
func (k keyspace) config(c store.ConfigKey) string {
	switch c.Level {
	case store.LevelEntity:
		return k.admin("c", "e", c.Resource, c.EntityID)
	case store.LevelResource:
		return k.admin("c", "r", c.Resource)
	}
	return k.admin("c", "s")
}

// errUnexpected reports a reply of a script the store does not understand.
var errUnexpected = errors.New("unexpected script reply")

// wrap gives an error of the server or the connection its context: the
// caller's context errors as they are (wrapped), everything else as
// [store.ErrUnavailable], which the limiter answers with its
// on-unavailable mode. Every message starts "limiter: ".
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("limiter: redis %s: %w", op, err)
	}
	return fmt.Errorf("%w: redis %s: %w", store.ErrUnavailable, op, err)
}

// itoa formats an int64 for a script argument.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// atoi parses a number the store wrote, saturating at the int64 limits
// (exact arithmetic in the scripts may leave a value beyond them). The
// common value, at most 18 digits, is parsed in place; anything else goes
// through strconv.
func atoi(s string) int64 {
	if n := len(s); n > 0 && n <= 18 {
		i, neg := 0, s[0] == '-'
		if neg {
			i = 1
		}
		var v int64
		for ; i < n && s[i]-'0' <= 9; i++ {
			v = v*10 + int64(s[i]-'0')
		}
		switch {
		case i < n || n == 1 && neg: // not all digits, or a lone sign
		case neg:
			return -v
		default:
			return v
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			if strings.HasPrefix(s, "-") {
				return -1 << 63
			}
			return 1<<63 - 1
		}
	}
	return v
}

// durationFromMillis converts a whole number of milliseconds (a decimal
// string of any size, or "never") to a Duration, saturating at the
// Duration limits as the limiter's bucket math does.
func durationFromMillis(ms string) time.Duration {
	const (
		maxMs = (1<<63 - 1) / int64(time.Millisecond)
		minMs = -1 << 63 / int64(time.Millisecond)
	)
	if ms == "never" || ms == "" {
		return 1<<63 - 1
	}
	v := atoi(ms)
	switch {
	case v > maxMs:
		return 1<<63 - 1
	case v < minMs:
		return -1 << 63
	}
	return time.Duration(v) * time.Millisecond
}
