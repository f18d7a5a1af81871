package redisstore

import (
	"context"
	"sync"

	"github.com/zaelimiter/limiter"
)

// Batching of speculative consumes.
//
// The speculative consume is the fast path of every acquire, and under
// concurrency its cost is the round trip more than the script: the
// server's time goes to reading and writing the connection. So the store
// keeps at most maxInFlight consume scripts in flight per slot group (all
// keys on a standalone server; one resource's buckets, which share a hash
// tag, on a Cluster). A request that finds them all in flight queues; when
// one returns, the first queued request becomes the leader of everything
// queued (up to maxBatch requests) and sends it as one script, in which
// every request is applied or refused on its own, one after the other,
// exactly as if it had been sent alone. Uncontended, a request is sent at
// once, as it would be without batching.
//
// No goroutine is started: the leader is a caller, and every caller
// returns once its own request is decided.

const (
	// maxInFlight is how many consume scripts of one slot group may be in
	// flight at once: two, so that the server runs one while the other's
	// reply and the next batch travel.
	maxInFlight = 2
	// maxBatch bounds the requests of one script, and so how long it
	// holds the server.
	maxBatch = 64
)

// consumeBatcher queues the speculative consumes of a store.
type consumeBatcher struct {
	mu     sync.Mutex
	groups map[string]*consumeGroup // by slot group ("" on a standalone server)
}

// consumeGroup is the state of one slot group; guarded by the batcher's mu.
type consumeGroup struct {
	inFlight int
	queue    []*pendingConsume
}

// pendingConsume is a request queued behind the scripts in flight.
type pendingConsume struct {
	req limiter.SpeculativeRequest
	// done is closed when the request is decided, or when it becomes the
	// leader of batch.
	done  chan struct{}
	taken bool              // out of the queue (in a batch); guarded by mu
	batch []*pendingConsume // set for a leader: the requests it sends
	res   limiter.SpeculativeResult
	err   error
}

// group returns the slot group of key's requests: every request on a
// standalone server, one per resource on a Cluster.
func (s *Store) consumeGroupOf(key limiter.BucketKey) string {
	if !s.sharded {
		return ""
	}
	return key.Resource
}

// consume runs req through the batcher.
func (s *Store) consume(ctx context.Context, req limiter.SpeculativeRequest) (limiter.SpeculativeResult, error) {
	b := &s.batcher
	name := s.consumeGroupOf(req.Key)
	b.mu.Lock()
	if b.groups == nil {
		b.groups = map[string]*consumeGroup{}
	}
	g := b.groups[name]
	if g == nil {
		g = &consumeGroup{}
		b.groups[name] = g
	}
	if g.inFlight < maxInFlight {
		g.inFlight++
		b.mu.Unlock()
		var res [1]limiter.SpeculativeResult
		err := s.consumeSlot(ctx, []limiter.SpeculativeRequest{req}, res[:])
		s.consumeDone(name, g)
		if err != nil {
			return limiter.SpeculativeResult{Key: req.Key}, err
		}
		return res[0], nil
	}
	p := &pendingConsume{req: req, done: make(chan struct{})}
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
			return limiter.SpeculativeResult{Key: req.Key}, wrap("consume", ctx.Err())
		}
		b.mu.Unlock()
		// In a batch already: its outcome is the caller's to know (an
		// applied request is given back by the limiter).
		<-p.done
	}
	if p.batch != nil {
		s.lead(ctx, name, g, p)
	}
	return p.res, p.err
}

// consumeDone ends a script of group g: the first queued request becomes
// the leader of the queue (the script's slot passes to it), or the slot
// is freed.
func (s *Store) consumeDone(name string, g *consumeGroup) {
	b := &s.batcher
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
	batch := make([]*pendingConsume, n)
	copy(batch, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	for _, p := range batch {
		p.taken = true
	}
	leader := batch[0]
	leader.batch = batch
	b.mu.Unlock()
	close(leader.done)
}

// lead sends leader's batch as one script, hands every request its
// result and ends the script. The script runs detached from the leader's
// cancellation: the other requests of the batch are not the leader's to
// abandon (go-redis's timeouts still bound it).
func (s *Store) lead(ctx context.Context, name string, g *consumeGroup, leader *pendingConsume) {
	batch := leader.batch
	reqs := make([]limiter.SpeculativeRequest, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	res, err := s.consumeEach(context.WithoutCancel(ctx), reqs)
	for i, p := range batch {
		if err != nil {
			p.res, p.err = limiter.SpeculativeResult{Key: p.req.Key}, err
		} else {
			p.res = res[i]
		}
		if p != leader {
			close(p.done)
		}
	}
	s.consumeDone(name, g)
}
