package redisstore

import (
	"context"
	"sync"

	"github.com/zaelimiter/limiter/store"
)

// Batching under concurrency.
//
// Under concurrency a request's cost on Redis is the round trip more than
// the script: the server's time goes to reading and writing the
// connection. So the store keeps at most maxInFlight calls of a kind
// (speculative consumes; Store.Allow) in flight per slot group (all keys
// on a standalone server; one resource's buckets, which share a hash tag,
// on a Cluster). A request that finds them all in flight queues; when one
// returns, the first queued request becomes the leader of everything
// queued (up to maxBatch requests) and sends it as one call, in which
// every request is decided on its own, one after the other, exactly as if
// it had been sent alone. Uncontended, a request is sent at once, as it
// would be without batching.
//
// No goroutine is started: the leader is a caller, and every caller
// returns once its own request is decided.

const (
	// maxInFlight is how many calls of one slot group may be in flight at
	// once: two, so that the server runs one while the other's reply and
	// the next batch travel.
	maxInFlight = 2
	// maxBatch bounds the requests of one call, and so how long it holds
	// the server.
	maxBatch = 64
)

// batcher queues requests of type Q whose results are of type R.
type batcher[Q, R any] struct {
	op   string                                           // names the call in errors
	one  func(ctx context.Context, req Q) (R, error)      // sends one request
	many func(ctx context.Context, reqs []Q) ([]R, error) // sends a batch, each decided alone

	mu     sync.Mutex
	groups map[string]*batchGroup[Q, R] // by slot group ("" on a standalone server)
	// idle holds *pending[Q, R] values with their done channel, so that a
	// queued request allocates neither.
	idle sync.Pool
}

// batchGroup is the state of one slot group; guarded by the batcher's mu.
type batchGroup[Q, R any] struct {
	inFlight int
	queue    []*pending[Q, R]
}

// pending is a request queued behind the calls in flight.
type pending[Q, R any] struct {
	req Q
	// done receives once when the request is decided, or when it becomes
	// the leader of batch (buffered: the sender never waits).
	done  chan struct{}
	taken bool             // out of the queue (in a batch); guarded by mu
	batch []*pending[Q, R] // set for a leader: the requests it sends
	res   R
	err   error
}

// do decides req, of slot group name, at once or in a batch.
func (b *batcher[Q, R]) do(ctx context.Context, name string, req Q) (R, error) {
	b.mu.Lock()
	if b.groups == nil {
		b.groups = map[string]*batchGroup[Q, R]{}
	}
	g := b.groups[name]
	if g == nil {
		g = &batchGroup[Q, R]{}
		b.groups[name] = g
	}
	if g.inFlight < maxInFlight {
		g.inFlight++
		b.mu.Unlock()
		res, err := b.one(ctx, req)
		b.done(name, g)
		return res, err
	}
	p, _ := b.idle.Get().(*pending[Q, R])
	if p == nil {
		p = &pending[Q, R]{done: make(chan struct{}, 1)}
	}
	p.req = req
	g.queue = append(g.queue, p)
	b.mu.Unlock()

	select {
	case <-p.done:
	case <-ctx.Done():
		b.mu.Lock()
		if !p.taken {
			// Not sent: leave the queue; nothing was taken.
			for i, q := range g.queue {
				if q == p {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
					break
				}
			}
			b.mu.Unlock()
			b.release(p) // out of the queue: nothing refers to it
			var zero R
			return zero, wrap(b.op, ctx.Err())
		}
		b.mu.Unlock()
		// In a batch already: its outcome is the caller's to know (an
		// applied request is given back by the limiter).
		<-p.done
	}
	if p.batch != nil {
		b.lead(ctx, name, g, p)
	}
	// Decided: the leader signalled p last and refers to it no more.
	res, err := p.res, p.err
	b.release(p)
	return res, err
}

// release returns p, which nothing refers to any more, to the idle pool.
func (b *batcher[Q, R]) release(p *pending[Q, R]) {
	done := p.done
	*p = pending[Q, R]{done: done}
	b.idle.Put(p)
}

// done ends a call of group g: the first queued request becomes the
// leader of the queue (the call's slot passes to it), or the slot is
// freed.
func (b *batcher[Q, R]) done(name string, g *batchGroup[Q, R]) {
	b.mu.Lock()
	if len(g.queue) == 0 {
		g.inFlight--
		if g.inFlight == 0 && name != "" {
			delete(b.groups, name) // Cluster groups are per resource: keep the map small
		}
		b.mu.Unlock()
		return
	}
	n := min(len(g.queue), maxBatch)
	batch := make([]*pending[Q, R], n)
	copy(batch, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	for _, p := range batch {
		p.taken = true
	}
	leader := batch[0]
	leader.batch = batch
	b.mu.Unlock()
	leader.done <- struct{}{}
}

// lead sends leader's batch as one call, hands every request its result
// and ends the call. The call runs detached from the leader's
// cancellation: the other requests of the batch are not the leader's to
// abandon (go-redis's timeouts still bound it).
func (b *batcher[Q, R]) lead(ctx context.Context, name string, g *batchGroup[Q, R], leader *pending[Q, R]) {
	batch := leader.batch
	reqs := make([]Q, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	res, err := b.many(context.WithoutCancel(ctx), reqs)
	for i, p := range batch {
		if err != nil {
			p.err = err
		} else {
			p.res = res[i]
		}
		if p != leader {
			p.done <- struct{}{} // p's caller owns it from here on
		}
	}
	b.done(name, g)
}

// consumeGroupOf returns the slot group of key's requests: every request
// on a standalone server, one per resource on a Cluster.
func (s *Store) consumeGroupOf(key store.BucketKey) string {
	if !s.sharded || s.keys.single {
		return ""
	}
	return key.Resource
}

// consume runs req through the batcher of speculative consumes.
func (s *Store) consume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	res, err := s.consumes.do(ctx, s.consumeGroupOf(req.Key), req)
	if err != nil {
		return store.SpeculativeResult{Key: req.Key}, err
	}
	return res, nil
}

// consumeOne sends one speculative consume.
func (s *Store) consumeOne(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	var res [1]store.SpeculativeResult
	err := s.consumeSlot(ctx, []store.SpeculativeRequest{req}, res[:])
	return res[0], err
}
