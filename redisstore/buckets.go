package redisstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// decodeBucket converts a bucket hash (HGETALL as a map, see
// lua/buckets.lua) to a Bucket; nil for an empty hash (a missing key).
func decodeBucket(key store.BucketKey, h map[string]string) *store.Bucket {
	if len(h) == 0 {
		return nil
	}
	b := &store.Bucket{Key: key, ShardCount: 1, States: make([]store.BucketState, 0, len(h)-1)}
	if hdr, ok := h["h"]; ok {
		decodeHeader(b, hdr)
	}
	for k, v := range h {
		decodeField(b, k, v)
	}
	finishBucket(b)
	return b
}

// decodeLines decodes an item a consume script returns, its n fields and
// values one a line at the start of s (nil when n is 0), and returns what
// follows them.
func decodeLines(key store.BucketKey, s string, n int) (*store.Bucket, string) {
	if n == 0 {
		return nil, s
	}
	var b *store.Bucket
	switch {
	case n <= 4: // the item and its one limit in one allocation
		x := &struct {
			b  store.Bucket
			st [1]store.BucketState
		}{}
		b = newBucket(&x.b, key, x.st[:0])
	case n/2 <= 3: // the item and its (up to two) limits in one allocation
		x := &struct {
			b  store.Bucket
			st [2]store.BucketState
		}{}
		b = newBucket(&x.b, key, x.st[:0])
	default:
		b = newBucket(new(store.Bucket), key, make([]store.BucketState, 0, n/2))
	}
	for range n / 2 {
		var k, v string
		k, s, _ = strings.Cut(s, "\n")
		v, s, _ = strings.Cut(s, "\n")
		if k == "h" {
			decodeHeader(b, v)
		} else {
			decodeField(b, k, v)
		}
	}
	finishBucket(b)
	return b, s
}

// newBucket sets *b to an empty item of key whose limits go in states,
// and returns b.
func newBucket(b *store.Bucket, key store.BucketKey, states []store.BucketState) *store.Bucket {
	*b = store.Bucket{Key: key, ShardCount: 1, States: states}
	return b
}

// decodeHeader sets b's item attributes from its header field.
func decodeHeader(b *store.Bucket, hdr string) {
	var f [5]string
	splitInto(f[:], hdr)
	b.RefillMs, b.ShardCount, b.Cascade, b.TTL, b.ParentID = atoi(f[0]), max(int(atoi(f[1])), 1), f[2] == "1", atoi(f[3]), f[4]
}

// decodeField adds the limit of field k (value v) to b, or sets its
// incarnation (field i); other fields are ignored.
func decodeField(b *store.Bucket, k, v string) {
	name, ok := strings.CutPrefix(k, "l:")
	if !ok {
		if k == "i" {
			b.Incarnation = atoi(v)
		}
		return
	}
	var f [5]string
	splitInto(f[:], v)
	key := b.Key
	b.States = append(b.States, store.BucketState{
		EntityID: key.EntityID, Resource: key.Resource, ShardID: key.Shard, LimitName: name,
		CapacityMilli: atoi(f[0]), RefillAmountMilli: atoi(f[1]), RefillPeriodMs: atoi(f[2]),
		TokensMilli: atoi(f[3]), TotalConsumedMilli: atoi(f[4]),
	})
}

// finishBucket gives every limit the item's refill time and orders the
// limits by name.
func finishBucket(b *store.Bucket) {
	for i := range b.States {
		b.States[i].LastRefillMs = b.RefillMs
	}
	slices.SortFunc(b.States, func(x, y store.BucketState) int { return strings.Compare(x.LimitName, y.LimitName) })
}

// splitInto splits a '|'-separated record into len(f) fields (missing ones
// empty; the last keeps any further separators).
func splitInto(f []string, s string) {
	for i := range f {
		if i == len(f)-1 {
			f[i] = s
			return
		}
		var ok bool
		f[i], s, ok = strings.Cut(s, "|")
		if !ok {
			return
		}
	}
}

// LoadBuckets implements [store.Repository]: one pipeline of HGETALLs
// (one round trip on a standalone server; one per server on a Cluster).
func (s *Store) LoadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]store.Entity, map[store.BucketKey]*store.Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	pipe := s.client.Pipeline()
	ents := make([]*redis.MapStringStringCmd, len(entityIDs))
	for i, id := range entityIDs {
		ents[i] = pipe.HGetAll(ctx, s.keys.entity(id))
	}
	bks := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		bks[i] = pipe.HGetAll(ctx, s.keys.bucket(k))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, wrap("read buckets", err)
	}
	metas := make(map[string]store.Entity, len(entityIDs))
	for i, id := range entityIDs {
		if h := ents[i].Val(); len(h) > 0 {
			metas[id] = decodeEntity(h)
		}
	}
	buckets := make(map[store.BucketKey]*store.Bucket, len(keys))
	for i, k := range keys {
		if b := decodeBucket(k, bks[i].Val()); b != nil {
			buckets[k] = b
		}
	}
	return metas, buckets, nil
}

// GetBucket implements [store.Repository]: one HGETALL.
func (s *Store) GetBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := s.client.HGetAll(ctx, s.keys.bucket(key)).Result()
	if err != nil {
		return nil, wrap("read bucket", err)
	}
	return decodeBucket(key, h), nil
}

// encodeWrite appends the script arguments of w (see lua/write.lua).
func encodeWrite(args []any, w store.BucketWrite) []any {
	kind := map[store.WriteKind]string{
		store.WriteCreate: "c", store.WriteNormal: "n", store.WriteRetry: "r",
		store.WriteAdjust: "a", store.WriteSync: "s", store.WriteReset: "x",
	}[w.Kind]
	ttl, abs, rel := "u", "0", "0"
	switch w.TTL {
	case store.TTLSet:
		secs := max(w.TTLSeconds, 1)
		ttl, abs, rel = "s", itoa(floorDiv(w.NowMs, 1000)+w.TTLSeconds), itoa(secs*1000)
	case store.TTLRemove:
		ttl = "r"
	}
	if w.Kind == store.WriteAdjust && w.TTLExtendSeconds > 0 {
		// An adjustment moves an existing TTL later (see lua/write.lua).
		ttl, abs, rel = "e", itoa(w.TTLExtendSeconds), itoa(bucketmath.SatMul(w.TTLExtendSeconds, 1000))
	}
	args = append(args, kind, itoa(w.NowMs), ttl, abs, rel, itoa(w.Incarnation))
	init := func(args []any, s *store.BucketState) []any {
		if s == nil {
			return append(args, "0")
		}
		return append(args, "1", itoa(s.TokensMilli), itoa(s.CapacityMilli), itoa(s.RefillAmountMilli), itoa(s.RefillPeriodMs))
	}
	switch w.Kind {
	case store.WriteCreate:
		args = append(args, strconv.Itoa(max(w.ShardCount, 1)), boolArg(w.Cascade), w.ParentID, strconv.Itoa(len(w.States)))
		for _, st := range w.States {
			args = append(args, st.LimitName, itoa(st.TokensMilli), itoa(st.TotalConsumedMilli),
				itoa(st.CapacityMilli), itoa(st.RefillAmountMilli), itoa(st.RefillPeriodMs))
		}
	case store.WriteNormal:
		args = append(args, itoa(w.ExpectedRefillMs), boolArg(w.RefreshEntity), boolArg(w.Cascade), w.ParentID, strconv.Itoa(len(w.Limits)))
		for _, l := range w.Limits {
			args = append(args, l.Name, itoa(l.ConsumedMilli), itoa(l.RefillMilli))
			args = init(args, l.Initial)
			if p := l.Params; p != nil {
				args = append(args, "1", itoa(p.CapacityMilli), itoa(p.RefillAmountMilli), itoa(p.RefillPeriodMs))
			} else {
				args = append(args, "0")
			}
		}
	case store.WriteRetry:
		args = append(args, strconv.Itoa(len(w.Limits)))
		for _, l := range w.Limits {
			args = append(args, l.Name, itoa(l.ConsumedMilli))
			args = init(args, l.Initial)
		}
	case store.WriteAdjust:
		args = append(args, strconv.Itoa(len(w.Limits)))
		for _, l := range w.Limits {
			args = append(args, l.Name, itoa(l.ConsumedMilli))
		}
	case store.WriteSync:
		args = append(args, strconv.Itoa(len(w.Limits)))
		for _, l := range w.Limits {
			i := l.Initial
			args = append(args, l.Name, itoa(i.TokensMilli), itoa(i.CapacityMilli), itoa(i.RefillAmountMilli), itoa(i.RefillPeriodMs))
		}
		args = append(args, strconv.Itoa(len(w.Remove)))
		for _, name := range w.Remove {
			args = append(args, name)
		}
	}
	return args
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// floorDiv is a/b rounded toward negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// WriteBuckets implements [store.Repository]: one script checks every
// write's condition and then applies them all, atomically. On a Cluster
// the items of one resource share a slot, so a cascade (child and parent)
// is one script; writes spanning resources (only
// [github.com/zaelimiter/limiter.RateLimiter.AcquireAll] sends them) run
// one script per resource, and when a later one's
// condition fails the earlier ones are given back (see the package doc).
func (s *Store) WriteBuckets(ctx context.Context, writes []store.BucketWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	for i, w := range writes {
		for j := range i {
			if writes[j].Key == w.Key {
				return &store.ValidationError{Field: "writes", Value: fmt.Sprint(w.Key), Reason: "two writes to one bucket item"}
			}
		}
	}
	groups := s.slotGroups(len(writes), func(i int) string { return writes[i].Key.Resource })
	for gi, g := range groups {
		part := make([]store.BucketWrite, len(g))
		for i, wi := range g {
			part[i] = writes[wi]
		}
		err := s.writeSlot(ctx, part)
		if err == nil {
			s.noteResources(ctx, part)
			continue
		}
		if gi > 0 {
			// Give back what the earlier groups took.
			for _, done := range groups[:gi] {
				for _, wi := range done {
					s.compensate(ctx, writes[wi])
				}
			}
		}
		return err
	}
	return nil
}

// slotGroups splits n items into groups that can share one script: one
// group on a standalone server or with Options.SingleSlot, one per
// resource (hash tag) otherwise, in
// order of first appearance.
func (s *Store) slotGroups(n int, resource func(int) string) [][]int {
	if !s.sharded || s.keys.single {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	var groups [][]int
	index := map[string]int{}
	for i := range n {
		r := resource(i)
		g, ok := index[r]
		if !ok {
			g = len(groups)
			index[r] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// writeSlot runs the write script on writes whose items share a slot.
// On a client that may resend, the call carries a write identifier (see
// lua/writeid.lua): a resent call that applied answers applied, once.
func (s *Store) writeSlot(ctx context.Context, writes []store.BucketWrite) error {
	keys := make([]string, len(writes)+1)
	args := make([]any, 1, 1+16*len(writes))
	for i, w := range writes {
		keys[i] = s.keys.bucket(w.Key)
		args = encodeWrite(args, w)
	}
	keys[len(writes)], args[0] = s.writeID(writes[0].Key.Resource, keys[0])
	v, err := s.run(ctx, scriptWrite, keys, args...)
	if err != nil {
		return err
	}
	res, _ := v.([]any)
	if len(res) > 0 && res[0] == int64(1) {
		return nil
	}
	failed := writes[0].Key
	if len(res) > 1 {
		if i, ok := res[1].(int64); ok && i >= 1 && int(i) <= len(writes) {
			failed = writes[i-1].Key
		}
	}
	return fmt.Errorf("write bucket %s/%s/%d: %w", failed.EntityID, failed.Resource, failed.Shard, store.ErrConditionFailed)
}

// compensate gives back what an applied write consumed: the give-back of a
// multi-slot write whose later part failed.
func (s *Store) compensate(ctx context.Context, w store.BucketWrite) {
	back := store.BucketWrite{Kind: store.WriteAdjust, Key: w.Key, NowMs: w.NowMs, Incarnation: w.Incarnation}
	switch w.Kind {
	case store.WriteCreate:
		for _, st := range w.States {
			if st.TotalConsumedMilli != 0 {
				back.Limits = append(back.Limits, store.LimitWrite{Name: st.LimitName, ConsumedMilli: -st.TotalConsumedMilli})
			}
		}
	case store.WriteNormal, store.WriteRetry, store.WriteAdjust:
		for _, l := range w.Limits {
			if l.ConsumedMilli != 0 {
				back.Limits = append(back.Limits, store.LimitWrite{Name: l.Name, ConsumedMilli: -l.ConsumedMilli})
			}
		}
	}
	if len(back.Limits) > 0 {
		_ = s.writeSlot(context.WithoutCancel(ctx), []store.BucketWrite{back})
	}
}

// noteResources records the resources of created items in the index that
// DeleteEntity reads, once per resource and store.
func (s *Store) noteResources(ctx context.Context, writes []store.BucketWrite) {
	for _, w := range writes {
		if w.Kind != store.WriteCreate {
			continue
		}
		if _, ok := s.knownResources.Load(w.Key.Resource); ok {
			continue
		}
		if s.client.SAdd(ctx, s.keys.bucketResources(), w.Key.Resource).Err() == nil {
			s.knownResources.Store(w.Key.Resource, true)
		}
	}
}

// limitArgs are the consume script's arguments of a limit, its field
// ("l:" + name) and "cp|ra|rp", boxed once.
type limitArgs struct{ name, params any }

// keptLimitArgs is a limit and its arguments, in a slot of
// Store.limitArgs.
type keptLimitArgs struct {
	limit store.Limit
	args  limitArgs
}

// limitArgsSlots is the size of Store.limitArgs.
const limitArgsSlots = 1024

// limitArgsSeed seeds the hash that picks a limit's slot.
var limitArgsSeed = maphash.MakeSeed()

// limitArgsOf returns the arguments of l, kept for the next request in
// l's slot of s.limitArgs (picked by a hash of its name and parameters): a
// hit reads one pointer and compares one Limit; a miss builds them and
// takes the slot from whichever limit held it.
func (s *Store) limitArgsOf(l store.Limit) limitArgs {
	h := maphash.String(limitArgsSeed, l.Name) ^ uint64(l.Capacity)*0x9e3779b97f4a7c15 ^
		uint64(l.RefillAmount)*0xbf58476d1ce4e5b9 ^ uint64(l.RefillPeriod)*0x94d049bb133111eb
	slot := &s.limitArgs[(h^h>>32)%limitArgsSlots]
	if e := slot.Load(); e != nil && e.limit == l {
		return e.args
	}
	la := limitArgs{name: "l:" + l.Name, params: itoa(store.MilliTokens(l.Capacity)) + "|" + itoa(store.MilliTokens(l.RefillAmount)) + "|" + itoa(l.RefillPeriod.Milliseconds())}
	slot.Store(&keptLimitArgs{limit: l, args: la})
	return la
}

// consumeArgs returns the command arguments of a consume script on reqs
// (see lua/consume_lib.lua), its first two left for exec: the items' keys,
// then the key of a new write identifier's hash, then the identifier (see
// writeID: empty, and the first item's key in the hash's place, on a
// client that never resends), then the requests: a request whose limits are the
// previous request's sends '=' in their place, one whose amounts are the
// previous request's too sends '*' in place of both, and one whose now is
// the previous request's as well sends '"' in place of all.
// The numbers are held in one slice and passed by pointer, and the limits'
// arguments are kept boxed (limitArgsOf), so that a request costs few
// allocations: two for a lone request of up to two limits and two amounts
// (its arguments, and its write identifier's key).
func (s *Store) consumeArgs(reqs []store.SpeculativeRequest) []any {
	if len(reqs) == 1 && len(reqs[0].Limits) <= 1 && len(reqs[0].Consume) <= 1 {
		x := &oneConsume1{}
		return s.loneArgs(&x.key, &x.wk, &x.id, x.full[:0], x.ints[:0], reqs[0])
	}
	if len(reqs) == 1 && len(reqs[0].Limits) <= 2 && len(reqs[0].Consume) <= 2 {
		x := &oneConsume{}
		return s.loneArgs(&x.key, &x.wk, &x.id, x.full[:0], x.ints[:0], reqs[0])
	}
	argc, nums := 5+len(reqs), 0
	for _, r := range reqs {
		argc += 3 + 2*len(r.Limits) + 2*len(r.Consume)
		nums += 1 + len(r.Consume)
	}
	full := make([]any, 4+len(reqs), argc)
	ints := make([]int64, 0, nums)
	keys := make([]string, len(reqs)+1)
	full[2] = len(reqs) + 1
	for i, r := range reqs {
		keys[i] = s.keys.bucket(r.Key)
		full[3+i] = &keys[i]
	}
	var id string
	keys[len(reqs)], id = s.writeID(reqs[0].Key.Resource, keys[0])
	full[3+len(reqs)] = &keys[len(reqs)]
	full = append(full, id)
	names := -1 // where the previous request's limits' boxed names start in full
	for i, r := range reqs {
		room := ints[len(ints):len(ints):cap(ints)]
		switch {
		case i == 0 || !slices.Equal(r.Limits, reqs[i-1].Limits):
			full, names = s.appendRequestAt(full, room, r)
			ints = ints[:len(ints)+1+len(r.Consume)]
		case !maps.Equal(r.Consume, reqs[i-1].Consume):
			full = s.appendSameLimits(full, room, r, names)
			ints = ints[:len(ints)+1+len(r.Consume)]
		case r.NowMs == reqs[i-1].NowMs:
			// the previous request's now, limits and amounts: '"'
			full = append(full, `"`)
		default:
			// the previous request's limits and amounts: its now and '*'
			room = append(room, r.NowMs)
			full = append(full, &room[0], "*")
			ints = ints[:len(ints)+1]
		}
	}
	return full
}

// loneArgs is consumeArgs of the lone request r in storage sized for it:
// the key in *key, the write identifier's hash and the identifier in *wk
// and *id, the arguments in full and the numbers in ints (both empty,
// with room for them).
func (s *Store) loneArgs(key, wk, id *string, full []any, ints []int64, r store.SpeculativeRequest) []any {
	*key = s.keys.bucket(r.Key)
	*wk, *id = s.writeID(r.Key.Resource, *key)
	return s.appendRequest(append(full, nil, nil, 2, key, wk, id), ints, r)
}

// oneConsume holds the arguments of a consume script on one request of up
// to two limits and two amounts.
type oneConsume struct {
	key, wk, id string
	ints        [3]int64
	full        [6 + 3 + 2*2 + 2*2]any
}

// oneConsume1 is oneConsume for one limit and one amount.
type oneConsume1 struct {
	key, wk, id string
	ints        [2]int64
	full        [6 + 3 + 2 + 2]any
}

// appendRequest appends r's arguments to full, its numbers held in ints,
// which must have room for 1+len(r.Consume) of them (so that the pointers
// stay valid).
func (s *Store) appendRequest(full []any, ints []int64, r store.SpeculativeRequest) []any {
	full, _ = s.appendRequestAt(full, ints, r)
	return full
}

// appendRequestAt is appendRequest, and returns the index in full of the
// first limit's boxed name too (full[names+2*i] is limit i's).
func (s *Store) appendRequestAt(full []any, ints []int64, r store.SpeculativeRequest) (_ []any, names int) {
	ints = append(ints, r.NowMs)
	full = append(full, &ints[len(ints)-1], len(r.Limits))
	names = len(full)
	for _, l := range r.Limits {
		la := s.limitArgsOf(l)
		full = append(full, la.name, la.params)
	}
	return s.appendAmounts(full, ints, r, names), names
}

// appendSameLimits appends the arguments of r, whose limits are the
// previous request's in the same call (their boxed names at full[names],
// full[names+2], ...): '=' in place of the limits (see
// lua/consume_lib.lua), then its amounts, its numbers held in ints as in
// appendRequest.
func (s *Store) appendSameLimits(full []any, ints []int64, r store.SpeculativeRequest, names int) []any {
	ints = append(ints, r.NowMs)
	full = append(full, &ints[len(ints)-1], "=")
	return s.appendAmounts(full, ints, r, names)
}

// appendAmounts appends the count and the amounts of r, whose limits'
// boxed names are at full[names], full[names+2], ...; ints holds r's now
// and has room for its amounts.
func (s *Store) appendAmounts(full []any, ints []int64, r store.SpeculativeRequest, names int) []any {
	full = append(full, len(r.Consume))
	// The amounts of the resolved limits first, by lookup (iterating a map
	// costs more than the lookups), then those of other limits (rare).
	taken := 0
	for i, l := range r.Limits {
		if v, ok := r.Consume[l.Name]; ok {
			taken++
			ints = append(ints, store.MilliTokens(v))
			full = append(full, full[names+2*i], &ints[len(ints)-1])
		}
	}
	if taken == len(r.Consume) {
		return full
	}
	for name, v := range r.Consume {
		if slices.ContainsFunc(r.Limits, func(l store.Limit) bool { return l.Name == name }) {
			continue
		}
		ints = append(ints, store.MilliTokens(v))
		full = append(full, "l:"+name, &ints[len(ints)-1])
	}
	return full
}

// SpeculativeConsume implements [store.SpeculativeStore]: one script,
// shared with the requests queued meanwhile under concurrency (see
// batcher.go).
func (s *Store) SpeculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	return s.consume(ctx, req)
}

// SpeculativeConsumeAll implements [store.BatchStore]: one script on a
// standalone server. On a Cluster, requests on several resources run one
// script per resource, in order, and the applied ones are given back when
// a later one is refused.
func (s *Store) SpeculativeConsumeAll(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, r := range reqs {
		for j := range i {
			if reqs[j].Key == r.Key {
				return nil, &store.ValidationError{Field: "requests", Value: fmt.Sprint(r.Key), Reason: "two requests on one bucket item"}
			}
		}
	}
	out := make([]store.SpeculativeResult, len(reqs))
	groups := s.slotGroups(len(reqs), func(i int) string { return reqs[i].Key.Resource })
	for gi, g := range groups {
		part := make([]store.SpeculativeRequest, len(g))
		for i, ri := range g {
			part[i] = reqs[ri]
		}
		res := make([]store.SpeculativeResult, len(part))
		err := s.consumeSlot(ctx, part, res)
		if err == nil && res[0].Applied {
			for i, ri := range g {
				out[ri] = res[i]
			}
			continue
		}
		// Refused (or failed): give back the earlier groups, and report
		// their items as they are after the give-back.
		for _, done := range groups[:gi] {
			for _, ri := range done {
				r := out[ri]
				back := store.BucketWrite{Kind: store.WriteAdjust, Key: r.Key, NowMs: reqs[ri].NowMs, Limits: consumeLimits(reqs[ri].Consume)}
				if r.Bucket != nil {
					back.Incarnation = r.Bucket.Incarnation
				}
				s.compensate(ctx, back)
				b, _ := s.GetBucket(context.WithoutCancel(ctx), r.Key)
				out[ri] = store.SpeculativeResult{Key: r.Key, Bucket: b}
			}
		}
		if err != nil {
			return nil, err
		}
		for i, ri := range g {
			out[ri] = res[i]
		}
		// The groups after this one were never tried: read their items.
		for _, later := range groups[gi+1:] {
			for _, ri := range later {
				b, err := s.GetBucket(ctx, reqs[ri].Key)
				if err != nil {
					return nil, err
				}
				out[ri] = store.SpeculativeResult{Key: reqs[ri].Key, Bucket: b}
			}
		}
		return out, nil
	}
	return out, nil
}

// consumeLimits turns an amount per limit (tokens) into the limit writes of
// an adjustment that takes them.
func consumeLimits(c store.Consume) []store.LimitWrite {
	out := make([]store.LimitWrite, 0, len(c))
	for name, v := range c {
		out = append(out, store.LimitWrite{Name: name, ConsumedMilli: store.MilliTokens(v)})
	}
	return out
}

// consumeEach runs the consume script that decides each request on its
// own (see batcher.go) on requests whose items share a slot.
func (s *Store) consumeEach(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	s.batches.Add(1)
	s.batchedConsume.Add(int64(len(reqs)))
	out := make([]store.SpeculativeResult, len(reqs))
	if err := s.consumeRun(ctx, scriptConsumeEach, reqs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// consumeSlot runs the consume script (all requests or none) on requests
// whose items share a slot, and writes their results into out.
func (s *Store) consumeSlot(ctx context.Context, reqs []store.SpeculativeRequest, out []store.SpeculativeResult) error {
	return s.consumeRun(ctx, scriptConsume, reqs, out)
}

// consumeRun runs consume script sc on reqs and writes their results into
// out. The reply is one string (see lua/consume_lib.lua, reply): per
// request, whether it was applied, the reason it was not, and its item.
func (s *Store) consumeRun(ctx context.Context, sc *script, reqs []store.SpeculativeRequest, out []store.SpeculativeResult) error {
	cmd, err := s.exec(ctx, sc, s.consumeArgs(reqs), replyString)
	if err != nil {
		return wrap(sc.name, err)
	}
	rest := cmd.(*redis.StringCmd).Val()
	for i, r := range reqs {
		var applied, reason, lines string
		applied, rest, _ = strings.Cut(rest, "\n")
		reason, rest, _ = strings.Cut(rest, "\n")
		lines, rest, _ = strings.Cut(rest, "\n")
		n, err := strconv.Atoi(lines)
		if err != nil || n < 0 || (applied != "1" && applied != "0") {
			return wrap(sc.name, errUnexpected)
		}
		var b *store.Bucket
		b, rest = decodeLines(r.Key, rest, n)
		out[i] = store.SpeculativeResult{Key: r.Key, Applied: applied == "1", Bucket: b, Reason: store.RefusalReason(reason)}
	}
	return nil
}
