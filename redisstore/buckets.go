package redisstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
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

// decodeJoined decodes an item the consume script returns: its fields and
// values joined by newlines ("" when the item is missing).
func decodeJoined(key store.BucketKey, item string) *store.Bucket {
	if item == "" {
		return nil
	}
	b := &store.Bucket{Key: key, ShardCount: 1, States: make([]store.BucketState, 0, strings.Count(item, "\n")/2)}
	for item != "" {
		var k, v string
		k, item, _ = strings.Cut(item, "\n")
		v, item, _ = strings.Cut(item, "\n")
		if k == "h" {
			decodeHeader(b, v)
		} else {
			decodeField(b, k, v)
		}
	}
	finishBucket(b)
	return b
}

// decodeHeader sets b's item attributes from its header field.
func decodeHeader(b *store.Bucket, hdr string) {
	var f [5]string
	splitInto(f[:], hdr)
	b.RefillMs, b.ShardCount, b.Cascade, b.TTL, b.ParentID = atoi(f[0]), max(int(atoi(f[1])), 1), f[2] == "1", atoi(f[3]), f[4]
}

// decodeField adds the limit of field k (value v) to b; other fields are
// ignored.
func decodeField(b *store.Bucket, k, v string) {
	name, ok := strings.CutPrefix(k, "l:")
	if !ok {
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

// LoadBuckets implements [limiter.Repository]: one pipeline of HGETALLs
// (one round trip on a standalone server; one per server on a Cluster).
func (s *Store) LoadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]limiter.Entity, map[store.BucketKey]*store.Bucket, error) {
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
	metas := make(map[string]limiter.Entity, len(entityIDs))
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

// GetBucket implements [limiter.Repository]: one HGETALL.
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
	args = append(args, kind, itoa(w.NowMs), ttl, abs, rel)
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

// WriteBuckets implements [limiter.Repository]: one script checks every
// write's condition and then applies them all, atomically. On a Cluster
// the items of one resource share a slot, so a cascade (child and parent)
// is one script; writes spanning resources (only [limiter.RateLimiter.AcquireAll]
// sends them) run one script per resource, and when a later one's
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
				return &limiter.ValidationError{Field: "writes", Value: fmt.Sprint(w.Key), Reason: "two writes to one bucket item"}
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
// group on a standalone server, one per resource (hash tag) otherwise, in
// order of first appearance.
func (s *Store) slotGroups(n int, resource func(int) string) [][]int {
	if !s.sharded {
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
func (s *Store) writeSlot(ctx context.Context, writes []store.BucketWrite) error {
	keys := make([]string, len(writes))
	args := make([]any, 0, 16*len(writes))
	for i, w := range writes {
		keys[i] = s.keys.bucket(w.Key)
		args = encodeWrite(args, w)
	}
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
	back := store.BucketWrite{Kind: store.WriteAdjust, Key: w.Key, NowMs: w.NowMs}
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

// encodeConsume appends the script arguments of req (see lua/consume.lua).
func encodeConsume(args []any, req store.SpeculativeRequest) []any {
	args = append(args, itoa(req.NowMs), strconv.Itoa(len(req.Limits)))
	for _, l := range req.Limits {
		args = append(args, l.Name, itoa(store.MilliTokens(l.Capacity))+"|"+itoa(store.MilliTokens(l.RefillAmount))+"|"+itoa(l.RefillPeriod.Milliseconds()))
	}
	names := make([]string, 0, len(req.Consume))
	for n := range req.Consume {
		names = append(names, n)
	}
	sort.Strings(names)
	args = append(args, strconv.Itoa(len(names)))
	for _, n := range names {
		args = append(args, n, itoa(store.MilliTokens(req.Consume[n])))
	}
	return args
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
				return nil, &limiter.ValidationError{Field: "requests", Value: fmt.Sprint(r.Key), Reason: "two requests on one bucket item"}
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
		res, err := s.consumeSlot(ctx, part)
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
				s.compensate(ctx, store.BucketWrite{Kind: store.WriteAdjust, Key: r.Key, NowMs: reqs[ri].NowMs, Limits: consumeLimits(reqs[ri].Consume)})
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
func consumeLimits(c limiter.Consume) []store.LimitWrite {
	out := make([]store.LimitWrite, 0, len(c))
	for name, v := range c {
		out = append(out, store.LimitWrite{Name: name, ConsumedMilli: store.MilliTokens(v)})
	}
	return out
}

// consumeArgs returns the keys and arguments of a consume script on reqs
// (see lua/consume_lib.lua).
func (s *Store) consumeArgs(reqs []store.SpeculativeRequest) ([]string, []any) {
	keys := make([]string, len(reqs))
	args := make([]any, 0, 12*len(reqs))
	for i, r := range reqs {
		keys[i] = s.keys.bucket(r.Key)
		args = encodeConsume(args, r)
	}
	return keys, args
}

// consumeEach runs the consume script that decides each request on its
// own (see batcher.go) on requests whose items share a slot.
func (s *Store) consumeEach(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	s.batches.Add(1)
	s.batchedConsume.Add(int64(len(reqs)))
	keys, args := s.consumeArgs(reqs)
	v, err := s.run(ctx, scriptConsumeEach, keys, args...)
	if err != nil {
		return nil, err
	}
	res, _ := v.([]any)
	if len(res) != 3*len(reqs) {
		return nil, wrap("consume", errUnexpected)
	}
	out := make([]store.SpeculativeResult, len(reqs))
	for i, r := range reqs {
		reason, _ := res[3*i+1].(string)
		item, _ := res[3*i+2].(string)
		out[i] = store.SpeculativeResult{Key: r.Key, Applied: res[3*i] == int64(1), Bucket: decodeJoined(r.Key, item), Reason: store.RefusalReason(reason)}
	}
	return out, nil
}

// consumeSlot runs the consume script on requests whose items share a slot.
func (s *Store) consumeSlot(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	keys, args := s.consumeArgs(reqs)
	v, err := s.run(ctx, scriptConsume, keys, args...)
	if err != nil {
		return nil, err
	}
	res, _ := v.([]any)
	if len(res) != 1+2*len(reqs) {
		return nil, wrap("consume", errUnexpected)
	}
	applied := res[0] == int64(1)
	out := make([]store.SpeculativeResult, len(reqs))
	for i, r := range reqs {
		reason, _ := res[1+i].(string)
		item, _ := res[1+len(reqs)+i].(string)
		out[i] = store.SpeculativeResult{Key: r.Key, Applied: applied, Bucket: decodeJoined(r.Key, item), Reason: store.RefusalReason(reason)}
	}
	return out, nil
}
