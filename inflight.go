// Layer 4, mechanics: limits of calls in flight ([InFlight]).
//
// An in-flight limit of n slots admits at most n slots held at once per
// bucket, across every process. Its slots live in generation buckets:
// time is cut into generations of half the slot TTL (E = TTL/2, g =
// floor(now/E)), and generation g of the limit is the ordinary bucket
// (entity, resource/name.slots.g) of capacity n with a negligible refill,
// whose tokens are the slots free in g. A lease covers the generations
// from its acquire through h, its coverage, and holds a slot in each of
// their buckets: its acquire at g takes the slots in g and g+1 (h = g+1),
// in the same atomic write as the acquire's rolling, calendar and prepaid
// buckets, so a refusal of any of them takes nothing. The bucket of the
// current generation thus counts every live lease exactly once, and its
// condition (tokens never below zero) is the cap. A goroutine owned by the
// lease renews the coverage when generation h starts by taking the slot
// in h+1, a whole E before h+1 starts, so a store slower than E/2 still
// keeps the slot (one conditional write per lease per E, all levels of
// its cascade in one batch); it stops when the lease ends, and every write
// it makes is bounded by the store's timeout. Commit and Rollback (and so
// Do's end, errors and panics included) stop it and give back the slots
// of every generation the lease covers. A process that dies stops renewing:
// its coverage ends at most 2E = TTL after its last write, and the
// generation buckets after it never held its slots; nothing reaps. A live
// lease that cannot renew before its coverage ends (the store unreachable,
// the process paused) takes its slots again only if they are free, and
// otherwise stops renewing: its call is then over the cap until it ends.
//
// Cost: an acquire with an in-flight limit takes the batch path, one atomic
// write of every bucket (one script on Redis, one lock in memory, one
// TransactWriteItems on DynamoDB: not the single UpdateItem of the plain
// fast path); its commit writes the refunds of the generation buckets; a
// lease held past E pays one write per E. Clocks of the processes must
// agree well within E/2.

package limiter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// DefaultSlotTTL is how long the slots of an in-flight limit held by a
// process that died stay taken at most ([WithSlotTTL]).
const DefaultSlotTTL = 30 * time.Second

// InFlight returns a limit of calls in flight: at most n slots held at
// once per bucket, across every process, e.g. InFlight("calls", 8). A
// lease takes consume[name] slots at its acquire (1 for one call) and
// gives them back when it ends ([Lease.Commit], [Lease.Rollback], the end
// of [RateLimiter.Do]). The slots of a process that died come back within
// the slot TTL ([WithSlotTTL]). With cascade, the parent's in-flight limit
// of the same name caps the slots of all its children together. An
// in-flight amount cannot be changed after the acquire (Consume, Adjust
// and Release refuse its name). A no-op lease of the allow
// on-unavailable mode holds no slot.
func InFlight(name string, n int64) Limit {
	return Limit{Name: name, Capacity: n, InFlight: true}
}

// WithSlotTTL sets the slot TTL of in-flight limits ([DefaultSlotTTL] by
// default; zero or less means the default): the slots held by a process
// that stops renewing them (it died, or lost the store for that long) are
// free again within this time. A live lease renews its slots once every
// half TTL.
func WithSlotTTL(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.slotTTL = d }
}

// slotGenMs returns the length of a slot generation in ms: half the slot
// TTL, at least 1.
func (rl *RateLimiter) slotGenMs() int64 {
	ttl := rl.slotTTL
	if ttl <= 0 {
		ttl = DefaultSlotTTL
	}
	return max(ttl.Milliseconds()/2, 1)
}

// slotGenOf returns the base resource and the generation of the bucket
// resource of in-flight limit name ([store.Limit.InFlightBucket]).
func slotGenOf(bucket, name string) (string, int64, bool) {
	infix := "/" + name + ".slots."
	i := strings.LastIndex(bucket, infix)
	if i < 0 {
		return "", 0, false
	}
	gen, err := strconv.ParseInt(bucket[i+len(infix):], 10, 64)
	return bucket[:i], gen, err == nil
}

// slotClaim is one in-flight limit of one entity a lease holds slots of.
type slotClaim struct {
	entityID string
	resource string // the base resource
	limit    Limit  // the in-flight limit
	amount   int64
}

// slotKeeper renews the coverage of a lease's slots until the lease ends.
type slotKeeper struct {
	rl     *RateLimiter
	claims []slotClaim
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	covered int64         // the last generation the lease's slots cover
	entries []*leaseEntry // the slots taken by renewals
	lost    bool          // a renewal was refused: the lease's slots lapsed
}

// keepSlots starts the keeper of lease when its items hold in-flight
// buckets.
func (rl *RateLimiter) keepSlots(lease *Lease, items []*batchItem) {
	if lease == nil || lease.noop {
		return
	}
	k := &slotKeeper{rl: rl, covered: -1 << 62}
	for _, it := range items {
		if it.cal == nil || !it.cal.IsInFlight() {
			continue
		}
		base, gen, ok := slotGenOf(it.group.resource, it.cal.Name)
		if !ok {
			continue
		}
		k.covered = max(k.covered, gen)
		c := slotClaim{entityID: it.group.entityID, resource: base, limit: *it.cal, amount: it.consume[it.cal.Name]}
		dup := false
		for _, o := range k.claims {
			dup = dup || (o.entityID == c.entityID && o.resource == c.resource && o.limit.Name == c.limit.Name)
		}
		if !dup && c.amount > 0 {
			k.claims = append(k.claims, c)
		}
	}
	if len(k.claims) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	lease.slots = k
	go k.run(ctx)
}

// run renews the coverage when the last covered generation starts, so
// that the next one is written a whole generation before it starts (a
// slow store has that long), until ctx is cancelled, the limiter closes
// or a renewal is refused. A process that dies just after a renewal holds
// its slots two generations more: one slot TTL.
func (k *slotKeeper) run(ctx context.Context) {
	defer close(k.done)
	genMs := k.rl.slotGenMs()
	for {
		k.mu.Lock()
		h := k.covered
		k.mu.Unlock()
		wait := time.Duration(h*genMs-k.rl.nowMs()) * time.Millisecond
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-k.rl.gate.life.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		switch err := k.renew(ctx, h, genMs); {
		case err == nil:
		case errors.Is(err, ErrRateLimited) || errors.Is(err, ErrClosed) || ctx.Err() != nil:
			return
		default:
			// The store failed: try again soon, until the coverage ends
			// (then the renewal takes the slots again, conditionally).
			t := time.NewTimer(time.Duration(max(genMs/10, 1)) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// renew takes the lease's slots in the generations after h through the one
// after the current one, in one atomic write of every claim's buckets.
func (k *slotKeeper) renew(ctx context.Context, h, genMs int64) error {
	if err := k.rl.enter(); err != nil {
		return err
	}
	defer k.rl.exit()
	now := k.rl.nowMs()
	g := bucketmath.FloorDiv(now, genMs)
	if h > g {
		return nil
	}
	var items []*batchItem
	for _, c := range k.claims {
		for gen := max(h+1, g); gen <= g+1; gen++ {
			bucket, err := c.limit.InFlightBucket(c.resource, gen)
			if err != nil {
				return err
			}
			bl := c.limit.InFlightBucketLimit()
			cal := c.limit
			items = append(items, &batchItem{
				group:   entityGroup{entityID: c.entityID, resource: bucket, limits: []Limit{bl}, source: SourceOverride, expireAtMs: slotBucketExpiry(gen, genMs)},
				consume: Consume{c.limit.Name: c.amount},
				cal:     &cal,
			})
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(genMs)*time.Millisecond)
	defer cancel()
	lease, err := k.rl.chargeItems(wctx, items)
	k.mu.Lock()
	defer k.mu.Unlock()
	if errors.Is(err, ErrRateLimited) {
		k.lost = true
	}
	if err != nil {
		return err
	}
	for _, e := range lease.entries {
		for _, c := range k.claims {
			if e.key.EntityID == c.entityID && e.limit.Name == c.limit.Name {
				e.limit = c.limit
			}
		}
		e.acquiredMs = now
	}
	k.entries = append(k.entries, lease.entries...)
	k.covered = g + 1
	return nil
}

// halt stops the keeper and returns the entries of the slots its renewals
// took.
func (k *slotKeeper) halt() []*leaseEntry {
	k.cancel()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.entries
	k.entries = nil
	return out
}

// chargeItems takes items in one atomic step: the store's speculative
// batch, else the read-then-write batch.
func (rl *RateLimiter) chargeItems(ctx context.Context, items []*batchItem) (*Lease, error) {
	if rl.store.batch != nil && rl.speculative {
		lease, _, decided, err := rl.speculativeAll(ctx, items)
		if decided || err != nil {
			return lease, err
		}
	}
	for attempt := 0; ; attempt++ {
		lease, statuses, err := rl.slowAll(ctx, items)
		if !errors.Is(err, errReread) {
			return lease, err
		}
		again, _, err := rl.afterLostRace(ctx, attempt)
		if err != nil {
			return nil, err
		}
		if !again {
			var all []LimitStatus
			for _, st := range statuses {
				all = append(all, st...)
			}
			return nil, newRateLimitExceededError(all)
		}
	}
}

// endSlots stops the lease's slot keeper and adds the slots its renewals
// took to the lease's entries; with release set, every in-flight entry is
// set to give all its slots back at the next write (Commit).
func (ls *Lease) endSlots(release bool) {
	if ls.slots != nil {
		ls.entries = append(ls.entries, ls.slots.halt()...)
		ls.slots = nil
	}
	if !release {
		return
	}
	for _, e := range ls.entries {
		if e.limit.IsInFlight() {
			e.deltaMilli = -bucketmath.SatMul(e.consumed, 1000)
		}
	}
}

// checkSlotNames refuses a change of an in-flight amount after the
// acquire: slots are taken only by the acquire's conditional write.
func (ls *Lease) checkSlotNames(c Consume) error {
	for _, e := range ls.entries {
		if _, ok := c[e.limit.Name]; ok && e.limit.IsInFlight() {
			return store.NewValidationError(ErrValidation, "consume", e.limit.Name,
				"in-flight slots are taken by the acquire and given back when the lease ends; they cannot be adjusted")
		}
	}
	return nil
}
