package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/zaelimiter/limiter"
)

// setupParallelism bounds the concurrent writes of [Setup].
const setupParallelism = 16

// Setup prepares the table for s (which must be resolved): with stored
// limits it stores RPM and TPM as the resource's defaults; with cascade it
// creates the parents with their limits and the entities as their
// cascading children (entities that exist already are kept). Without either
// there is nothing to do: buckets are created by the first acquire.
func Setup(ctx context.Context, rl *limiter.RateLimiter, s Scenario) error {
	if s.StoredLimits {
		if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: s.Resource}, limitsOf(s.RPM, s.TPM)); err != nil {
			return fmt.Errorf("setup: resource defaults: %w", err)
		}
	}
	if !s.Cascade {
		return nil
	}
	create := func(e limiter.Entity) error {
		if _, err := rl.Admin().CreateEntity(ctx, e); err != nil && !errors.Is(err, limiter.ErrEntityExists) {
			return fmt.Errorf("setup: create entity %s: %w", e.ID, err)
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(setupParallelism)
	for p := range s.Parents {
		id := s.ParentID(p)
		g.Go(func() error {
			if err := create(limiter.Entity{ID: id}); err != nil {
				return err
			}
			if err := rl.Admin().SetLimits(gctx, limiter.Scope{Entity: id, Resource: s.Resource}, limitsOf(s.ParentRPM, s.ParentTPM)); err != nil {
				return fmt.Errorf("setup: limits of %s: %w", id, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	g, _ = errgroup.WithContext(ctx)
	g.SetLimit(setupParallelism)
	for i := range s.Entities {
		g.Go(func() error { return create(limiter.Entity{ID: s.EntityID(i), ParentID: s.ParentID(i), Cascade: true}) })
	}
	return g.Wait()
}

func limitsOf(rpm, tpm int64) []limiter.Limit {
	return []limiter.Limit{limiter.PerMinute("rpm", rpm), limiter.PerMinute("tpm", tpm)}
}

// RunOptions configures [Run]. The zero value runs at once without
// progress callbacks.
type RunOptions struct {
	// StartAt, when in the future, is when the workers start: the
	// processes of one run start together.
	StartAt time.Time
	// Tick, when not nil, is called every TickInterval (default 1 s) from
	// Run's goroutine with the time since the start and the measurements
	// since the previous call.
	Tick         func(elapsed time.Duration, since *Result)
	TickInterval time.Duration
}

// Run drives rl with the scenario s (resolved, and set up with [Setup]) for
// its duration and records every acquire into rec, enabling meter (which
// should be attached to rl's DynamoDB client) for the run only. Each worker
// loops: pick an entity, acquire rpm 1 and the token estimate, adjust by the
// real count, commit. When ctx ends the workers stop early; calls cut short
// by it are not counted. Run returns when every worker has stopped.
func Run(ctx context.Context, rl *limiter.RateLimiter, meter *CallMeter, rec *Recorder, s Scenario, o RunOptions) error {
	if o.TickInterval <= 0 {
		o.TickInterval = time.Second
	}
	if wait := time.Until(o.StartAt); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	var opts []limiter.AcquireOption
	if !s.StoredLimits {
		opts = append(opts, limiter.WithLimits(limitsOf(s.RPM, s.TPM)...))
	}
	seed := s.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	start := time.Now()
	end := start.Add(time.Duration(s.Duration))
	res := rec.Result()
	res.Start = start
	meter.Enable(true)
	var slot atomic.Int64 // the next pacing slot, with Rate
	var wg sync.WaitGroup
	for w := range s.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := worker{rl: rl, rec: rec, s: &s, opts: opts, r: rand.New(rand.NewPCG(seed, uint64(w)))}
			for {
				if s.Rate > 0 {
					at := start.Add(time.Duration(float64(slot.Add(1)-1) / s.Rate * float64(time.Second)))
					if !at.Before(end) || !sleepUntil(ctx, at) {
						return
					}
				}
				if ctx.Err() != nil || !time.Now().Before(end) {
					return
				}
				wk.once(ctx)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ticker := time.NewTicker(o.TickInterval)
	defer ticker.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-ticker.C:
			if o.Tick != nil {
				o.Tick(time.Since(start), rec.Tick())
			}
		}
	}
	meter.Enable(false)
	res.End = time.Now()
	if res.Procs == 0 {
		res.Procs = 1
	}
	if o.Tick != nil {
		o.Tick(time.Since(start), rec.Tick())
	}
	return ctx.Err()
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// worker is one goroutine of a run.
type worker struct {
	rl   *limiter.RateLimiter
	rec  *Recorder
	s    *Scenario
	opts []limiter.AcquireOption
	r    *rand.Rand
}

// once runs one acquire, adjust, commit and records it.
func (w *worker) once(ctx context.Context) {
	s := w.s
	entity := s.EntityID(s.pick(w.r))
	actual := s.actualTokens(w.r)
	t0 := time.Now()
	lease, err := w.rl.Acquire(ctx, entity, s.Resource, limiter.Consume{"rpm": 1, "tpm": s.TokensEstimate}, w.opts...)
	t1 := time.Now()
	if ctx.Err() != nil {
		if err == nil {
			_ = lease.Rollback(ctx)
		}
		return // cut short by the caller: not a measurement
	}
	switch {
	case errors.Is(err, limiter.ErrRateLimited):
		w.rec.Record(t1, Denied, t1.Sub(t0), 0, nil, nil, nil)
		return
	case err != nil:
		w.rec.Record(t1, Failed, t1.Sub(t0), 0, nil, nil, err)
		return
	}
	if d := actual - s.TokensEstimate; d != 0 {
		if err := lease.Adjust(limiter.Consume{"tpm": d}); err != nil {
			_ = lease.Rollback(ctx)
			w.rec.Record(time.Now(), Failed, t1.Sub(t0), 0, nil, nil, err)
			return
		}
	}
	if err := lease.Commit(ctx); err != nil {
		if ctx.Err() == nil {
			w.rec.Record(time.Now(), Failed, t1.Sub(t0), 0, nil, nil, fmt.Errorf("commit: %w", err))
		}
		return
	}
	t2 := time.Now()
	own, parent := charged(lease, entity)
	w.rec.Record(t2, Admitted, t1.Sub(t0), t2.Sub(t0), own, parent, nil)
}

// charged returns, per limit, the whole tokens a committed lease stays
// charged on entity's bucket and on its parent's: what it took, less the
// refunds the lease's refund rule let through (a refund is cut by what the
// limit refilled while the lease was held).
func charged(lease *limiter.Lease, entity string) (own, parent map[string]int64) {
	own = map[string]int64{}
	for _, s := range lease.Statuses() {
		if s.EntityID == entity {
			own[s.Limit.Name] += s.Held
			continue
		}
		if parent == nil {
			parent = map[string]int64{}
		}
		parent[s.Limit.Name] += s.Held
	}
	return own, parent
}
