package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The model test (Run's "Model"): the limiter on the backend under test
// and an exact reference token bucket (refModel) take the same
// operations, one at a time — acquires with several limits, Adjust up and
// down, Release, Lease.Consume, Commit, Rollback, Do, idle periods of any
// length on the suite clock, limit changes per call and stored at every
// level, a cascade to a parent — as focused sequences and as seeded
// random sequences, in every combination of
// speculative writes, background commit and group commit.
//
// The reference follows the limiter's decisions: what the limiter refuses
// it applies nothing for. After every operation:
//
//   - every admission must be one the reference admits: its balance,
//     refilled to now, holds each positive amount of each limit of the
//     entity and, with cascade, of its parent;
//   - no stored balance, refilled to now as the limiter computes it, and
//     no Available, exceeds the reference's;
//   - the stored totals consumed lie between the reference's with the
//     refunds the rule gives and without any refund;
//   - a refusal says when to retry (a positive RetryAfter), an admitted
//     acquire stores the limits it resolved, and Lease.Consumed equals
//     what the lease took while it refunded nothing, and never exceeds it.
//
// The refund rule: a refund (Adjust with a negative amount, Release,
// Rollback) at time t gives back, per limit of each bucket item the lease
// holds, at most max(0, held − floor(ra × (t − t0) / rp)) millitokens, where
// held is what the lease has taken on it so far (the acquire's amount plus
// later positive adjustments less the refunds already given), t0 the
// acquire's time and ra, rp the refill amount and period of the limit the
// acquire resolved; the balance is also capped at the capacity. An Adjust
// or Release counts at the time of the call (the most a limiter that
// applies the rule at Commit could give back). A Commit or Rollback applies to
// the reference when it is called, with background commit as without it:
// until the limiter has written a background commit, a stored balance may
// exceed the reference's by the positive adjustments committed in the
// background, and the totals are compared only once the limiter is closed.
//
// The first violation fails the test with the seed, the step, the mode,
// a command that replays it and the last operations.

// Environment variables of the model test's size.
const (
	// modelSeedEnv runs the random sequence of this one seed.
	modelSeedEnv = "ZAEL_MODEL_SEED"
	// modelSeedsEnv runs the random sequences of seeds 1 to N.
	modelSeedsEnv = "ZAEL_MODEL_SEEDS"
	// modelStepsEnv sets the operations per random sequence.
	modelStepsEnv = "ZAEL_MODEL_STEPS"
)

// The quick size, which Run uses by default: one seed per mode.
const (
	modelQuickSeeds = 1
	modelQuickSteps = 150
)

// modelMode is one combination of the limiter options the model varies.
type modelMode struct{ spec, bg, group bool }

func (md modelMode) String() string {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	return fmt.Sprintf("spec=%d,bg=%d,gc=%d", b(md.spec), b(md.bg), b(md.group))
}

func modelModes() []modelMode {
	var out []modelMode
	for _, spec := range []bool{true, false} {
		for _, bg := range []bool{false, true} {
			for _, group := range []bool{true, false} {
				out = append(out, modelMode{spec: spec, bg: bg, group: group})
			}
		}
	}
	return out
}

// modelSize returns the seeds and steps of the random sequences, and
// whether the size is the long one (any of the variables set).
func modelSize(t *testing.T) (seeds []uint64, steps int, long bool) {
	t.Helper()
	num := func(env string) int {
		v := os.Getenv(env)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", env, v)
		}
		return n
	}
	steps = modelQuickSteps
	if n := num(modelStepsEnv); n > 0 {
		steps, long = n, true
	}
	if n := num(modelSeedEnv); n > 0 {
		return []uint64{uint64(n)}, steps, true
	}
	count := modelQuickSeeds
	if n := num(modelSeedsEnv); n > 0 {
		count, long = n, true
	}
	for i := 1; i <= count; i++ {
		seeds = append(seeds, uint64(i))
	}
	return seeds, steps, long
}

// runModel runs the focused sequences and the random ones in every mode,
// each mode on one new repository (every sequence under keys of its own).
func runModel(t *testing.T, newRepo func(t *testing.T) store.Repository) {
	seeds, steps, long := modelSize(t)
	for _, mode := range modelModes() {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			if _, ok := repo.(store.SpeculativeStore); mode.spec && !ok {
				t.Skip("the repository is no store.SpeculativeStore: the speculative path is the slow one")
			}
			for _, c := range modelCases {
				if c.applies != nil && !c.applies(mode) || c.long && !long {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					m := newModelRun(t, repo, mode, strings.ToLower(c.name), 0)
					c.run(m)
					m.finish()
				})
			}
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					m := newModelRun(t, repo, mode, fmt.Sprintf("s%d", seed), seed)
					m.random(steps)
					m.finish()
				})
				// The same sequence with entity-wide limits stored and
				// deleted between its operations.
				t.Run(fmt.Sprintf("seed=%d,wide", seed), func(t *testing.T) {
					m := newModelRun(t, repo, mode, fmt.Sprintf("w%d", seed), seed)
					m.wide = true
					m.rl = m.newLimiter()
					m.random(steps)
					m.finish()
				})
			}
		})
	}
}

// modelRun is one sequence: the limiter under test, the reference, the
// leases open in both, and the log of operations.
type modelRun struct {
	t        *testing.T
	ctx      context.Context
	repo     store.Repository
	mode     modelMode
	seed     uint64 // 0 for a focused sequence
	clock    *Clock
	rl       *limiter.RateLimiter
	ref      *refModel
	resource string
	entities []string
	leases   []*modelLease
	nextID   int
	step     int
	log      []string
	// override is the per-call limits of acquires that pass WithLimits.
	override []store.Limit
	// slack is, per limit of each item, the positive adjustments
	// committed in the background since the limiter was last closed: the
	// most a stored balance may exceed the reference's until the limiter
	// has written them. bgPending is set while any such commit is
	// outstanding (the totals are then not compared).
	slack     map[store.BucketKey]map[string]*big.Int
	bgPending bool
	// skipChecks, in a focused sequence, leaves out the store checks
	// after the next operation (so that it is followed at once by the
	// next, as background commit's folding needs); checkBalances off
	// checks admissions only.
	skipChecks    bool
	checkBalances bool
	// storeChecks off leaves out every store check until it is on again.
	storeChecks bool
	// expect holds the limits an operation must have stored per item.
	expect map[store.BucketKey][]store.Limit
	// wide, in a random sequence, stores and deletes entity-wide limits
	// (AllResources) between its operations, on a limiter without
	// bucket TTLs: what it checks is the entity-wide buckets, not the
	// expiry of buckets (which forgives a debt or a charge committed
	// after it, and which the other sequences draw).
	wide bool
}

// modelLease is a lease open in the limiter and in the reference.
type modelLease struct {
	id      int
	lease   *limiter.Lease
	entity  string
	entries []*refEntry
}

func newModelRun(t *testing.T, repo store.Repository, mode modelMode, tag string, seed uint64) *modelRun {
	m := &modelRun{t: t, ctx: context.Background(), repo: repo, mode: mode, seed: seed, clock: NewClock(), ref: newRefModel(),
		resource: "gpt-" + tag, slack: map[store.BucketKey]map[string]*big.Int{}, checkBalances: true, storeChecks: true}
	m.rl = m.newLimiter()
	return m
}

func (m *modelRun) newLimiter() *limiter.RateLimiter {
	opts := []func(*limiter.Options){func(o *limiter.Options) { o.Clock = m.clock.Now }, func(o *limiter.Options) { o.SpeculativeWrites = m.mode.spec },
		func(o *limiter.Options) { o.BackgroundCommit = m.mode.bg }, func(o *limiter.Options) { o.GroupCommit = m.mode.group }}
	if m.wide {
		opts = append(opts, func(o *limiter.Options) { o.BucketTTLPeriods = 0 })
	}
	return limiter.New(m.repo, opts...)
}

func (m *modelRun) nowMs() int64 { return m.clock.Now().UnixMilli() }

// begin starts an operation: the next step, logged.
func (m *modelRun) begin(format string, args ...any) {
	m.step++
	m.expect = nil
	m.log = append(m.log, fmt.Sprintf("#%d +%v %s", m.step, m.clock.Now().Sub(Epoch), fmt.Sprintf(format, args...)))
}

// note adds to the current operation's log line.
func (m *modelRun) note(format string, args ...any) {
	m.log[len(m.log)-1] += " " + fmt.Sprintf(format, args...)
}

// fail reports a violation (or an unexpected error) and ends the test.
func (m *modelRun) fail(format string, args ...any) {
	m.t.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "model violation: %s\n", fmt.Sprintf(format, args...))
	fmt.Fprintf(&sb, "  mode %s, step %d", m.mode, m.step)
	parts := strings.Split(m.t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	run := strings.Join(parts, "/")
	if m.seed != 0 {
		fmt.Fprintf(&sb, ", seed %d\n  replay: %s=%d %s=%d go test -count=1 -run '%s' <the backend's package>\n", m.seed, modelSeedEnv, m.seed, modelStepsEnv, m.step, run)
	} else {
		fmt.Fprintf(&sb, "\n  replay: go test -count=1 -run '%s' <the backend's package>\n", run)
	}
	sb.WriteString("  last operations:\n")
	tail := m.log[max(0, len(m.log)-60):]
	for _, l := range tail {
		sb.WriteString("    " + l + "\n")
	}
	m.t.Fatal(sb.String())
}

// entity creates an entity, cascading to parent when parent is set.
func (m *modelRun) entity(id, parent string) {
	e := store.Entity{ID: id}
	if parent != "" {
		e.ParentID, e.Cascade = parent, true
		m.ref.parent[id] = parent
	}
	if _, err := m.rl.Admin().CreateEntity(m.ctx, e); err != nil {
		m.fail("create entity %s: %v", id, err)
	}
	m.entities = append(m.entities, id)
}

func (m *modelRun) key(entity string) store.BucketKey {
	return store.BucketKey{EntityID: entity, Resource: m.resource}
}

// wideKey is the key of entity's entity-wide bucket.
func (m *modelRun) wideKey(entity string) store.BucketKey {
	return store.BucketKey{EntityID: entity, Resource: store.AllResources}
}

// wideFor returns the limits of entity's entity-wide bucket that an
// acquire resolves: none with per-call limits (WithLimits reads no
// config), else the stored ones.
func (m *modelRun) wideFor(entity string, override []store.Limit) []store.Limit {
	if override != nil {
		return nil
	}
	return m.ref.resolve(entity, store.AllResources)
}

// limitsFor returns the limits an acquire on entity resolves: override,
// or the stored ones.
func (m *modelRun) limitsFor(entity string, override []store.Limit) []store.Limit {
	if override != nil {
		return override
	}
	return m.ref.resolve(entity, m.resource)
}

func limitsString(ls []store.Limit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=%d/%d/%v", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func consumeString(c store.Consume) string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s:%d", n, c[n])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func milli(tokens int64) *big.Int { return new(big.Int).Mul(big.NewInt(tokens), big.NewInt(1000)) }

// acquireOpts returns the options of an acquire with override (nil: the
// stored limits).
func acquireOpts(override []store.Limit) []limiter.AcquireOption {
	if override == nil {
		return nil
	}
	return []limiter.AcquireOption{limiter.WithLimits(toCallerLimits(override)...)}
}

// refused checks a refusal: a *RateLimitExceededError with a positive
// RetryAfter. Other errors fail the test.
func (m *modelRun) refused(what string, err error) {
	m.t.Helper()
	var rle *limiter.RateLimitExceededError
	if !errors.As(err, &rle) {
		m.fail("%s: unexpected error %v", what, err)
	}
	m.note("→ refused (retry after %v)", rle.RetryAfter)
	if rle.RetryAfter <= 0 && !rle.NeverFits() {
		m.fail("%s: refused with a retry-after of %v, want a positive one", what, rle.RetryAfter)
	}
}

// admit applies an admitted acquire of c on entity at now to the
// reference, checking that the reference admits it, and returns the
// lease's entries.
func (m *modelRun) admit(entity string, c store.Consume, override []store.Limit) []*refEntry {
	m.t.Helper()
	now := m.nowMs()
	type group struct {
		key    store.BucketKey
		limits []store.Limit
	}
	// Each entity of the chain: its bucket on the resource, then its
	// entity-wide bucket when it has entity-wide limits.
	var groups []group
	for _, e := range []string{entity, m.ref.parent[entity]} {
		if e == "" {
			continue
		}
		groups = append(groups, group{m.key(e), m.limitsFor(e, override)})
		if wide := m.wideFor(e, override); len(wide) > 0 {
			groups = append(groups, group{m.wideKey(e), wide})
		}
	}
	m.expect = map[store.BucketKey][]store.Limit{}
	var entries []*refEntry
	for _, g := range groups {
		m.expect[g.key] = g.limits
		it := m.ref.items[g.key]
		if it == nil {
			it = &refItem{key: g.key, limits: map[string]*refBucket{}}
			m.ref.items[g.key] = it
		}
		fresh := it.vanished
		it.vanished = false
		for _, l := range g.limits {
			p := paramsOf(l)
			b := it.limits[l.Name]
			if b == nil || fresh {
				b = newRefBucket(p, now)
				it.limits[l.Name] = b
			} else if b.p != p {
				b.change(p, now)
			} else {
				b.refill(now)
			}
			amount := milli(c[l.Name])
			if amount.Sign() > 0 && !b.covers(amount) {
				m.fail("admitted %s of %s on %s/%s, the exact bucket holds %s (%s)",
					milliString(amount), l.Name, g.key.EntityID, g.key.Resource, ratString(b.bal), b.p)
			}
			b.take(amount)
			entries = append(entries, newRefEntry(g.key, l.Name, p, now, amount))
		}
	}
	return entries
}

// acquire runs Acquire on both sides and returns the lease, nil when the
// limiter refused.
func (m *modelRun) acquire(entity string, c store.Consume, override []store.Limit) *modelLease {
	m.t.Helper()
	m.begin("acquire %s %s %s", entity, consumeString(c), m.limitsLabel(override))
	lease, err := m.rl.Acquire(m.ctx, entity, m.resource, c, acquireOpts(override)...)
	if err != nil {
		m.refused("acquire", err)
		m.afterOp(entity, override)
		return nil
	}
	m.nextID++
	ml := &modelLease{id: m.nextID, lease: lease, entity: entity}
	m.note("→ L%d", ml.id)
	ml.entries = m.admit(entity, c, override)
	m.leases = append(m.leases, ml)
	m.checkConsumed(ml)
	m.afterOp(entity, override)
	return ml
}

func (m *modelRun) limitsLabel(override []store.Limit) string {
	if override == nil {
		return "stored"
	}
	return "with " + limitsString(override)
}

// adjust runs Lease.Adjust (or, with release, Lease.Release with the
// amounts of c, which are then non-negative).
func (m *modelRun) adjust(ml *modelLease, c store.Consume, release bool) {
	m.t.Helper()
	verb := "adjust"
	if release {
		verb = "release"
	}
	m.begin("%s L%d %s", verb, ml.id, consumeString(c))
	var err error
	if release {
		err = ml.lease.Release(c)
	} else {
		err = ml.lease.Adjust(c)
	}
	if err != nil {
		m.fail("%s: %v", verb, err)
	}
	m.adjustRef(ml, c, release)
	m.checkConsumed(ml)
}

func (m *modelRun) adjustRef(ml *modelLease, c store.Consume, negate bool) {
	now := m.nowMs()
	for _, e := range ml.entries {
		v := c[e.name]
		if v == 0 {
			continue
		}
		if negate {
			v = -v
		}
		if g := e.adjust(milli(v), now); v < 0 {
			m.note("%s.%s gives %s", e.key.EntityID, e.name, milliString(g))
		}
	}
}

// consume runs Lease.Consume: a positive adjustment the lease checks
// against its own view.
func (m *modelRun) consume(ml *modelLease, c store.Consume) {
	m.t.Helper()
	m.begin("consume L%d %s", ml.id, consumeString(c))
	if err := ml.lease.Consume(c); err != nil {
		if !errors.Is(err, limiter.ErrRateLimited) {
			m.fail("lease consume: %v", err)
		}
		m.note("→ refused")
		return
	}
	m.adjustRef(ml, c, false)
	m.checkConsumed(ml)
}

func (m *modelRun) dropLease(ml *modelLease) {
	m.leases = slices.DeleteFunc(m.leases, func(x *modelLease) bool { return x == ml })
}

// commit runs Lease.Commit.
func (m *modelRun) commit(ml *modelLease) {
	m.t.Helper()
	m.begin("commit L%d", ml.id)
	if err := ml.lease.Commit(m.ctx); err != nil {
		m.fail("commit: %v", err)
	}
	m.commitRef(ml)
	m.dropLease(ml)
	m.afterOp("", nil)
}

func (m *modelRun) commitRef(ml *modelLease) {
	now := m.nowMs()
	for _, e := range ml.entries {
		b := m.ref.items[e.key].limits[e.name]
		e.commit(b, now)
		if m.mode.bg && e.pending.Sign() != 0 {
			m.bgPending = true
			if e.pending.Sign() > 0 {
				s := m.slack[e.key]
				if s == nil {
					s = map[string]*big.Int{}
					m.slack[e.key] = s
				}
				if s[e.name] == nil {
					s[e.name] = new(big.Int)
				}
				s[e.name].Add(s[e.name], e.pending)
			}
		}
	}
}

// rollback runs Lease.Rollback.
func (m *modelRun) rollback(ml *modelLease) {
	m.t.Helper()
	m.begin("rollback L%d", ml.id)
	if err := ml.lease.Rollback(m.ctx); err != nil {
		m.fail("rollback: %v", err)
	}
	m.rollbackRef(ml)
	m.dropLease(ml)
	m.afterOp("", nil)
}

func (m *modelRun) rollbackRef(ml *modelLease) {
	now := m.nowMs()
	for _, e := range ml.entries {
		if e.initial.Sign() == 0 {
			continue
		}
		g := e.rollback(m.ref.items[e.key].limits[e.name], now)
		m.note("%s.%s gives %s of %s", e.key.EntityID, e.name, milliString(g), milliString(e.initial))
	}
}

// doAdjustment is one call Do's function makes on its lease.
type doAdjustment struct {
	c       store.Consume
	release bool
}

// do runs RateLimiter.Do with a function that makes adj and then fails
// (the acquire is rolled back) or returns nil (it is committed).
func (m *modelRun) do(entity string, c store.Consume, override []store.Limit, adj []doAdjustment, fnErr bool) {
	m.t.Helper()
	m.begin("do %s %s %s adj=%v fail=%v", entity, consumeString(c), m.limitsLabel(override), adj, fnErr)
	errFn := errors.New("the call failed")
	var ml *modelLease
	err := m.rl.Do(m.ctx, entity, m.resource, c, func(ctx context.Context, lease *limiter.Lease) error {
		m.nextID++
		ml = &modelLease{id: m.nextID, lease: lease, entity: entity}
		ml.entries = m.admit(entity, c, override)
		for _, a := range adj {
			var err error
			if a.release {
				err = lease.Release(a.c)
			} else {
				err = lease.Adjust(a.c)
			}
			if err != nil {
				return fmt.Errorf("adjust in Do: %w", err)
			}
			m.adjustRef(ml, a.c, a.release)
		}
		if fnErr {
			return errFn
		}
		return nil
	}, acquireOpts(override)...)
	switch {
	case ml == nil:
		m.refused("do", err)
	case fnErr && errors.Is(err, errFn):
		m.note("→ L%d rolled back", ml.id)
		m.rollbackRef(ml)
	case err == nil && !fnErr:
		m.note("→ L%d committed", ml.id)
		m.commitRef(ml)
	default:
		m.fail("do: %v", err)
	}
	m.afterOp(entity, override)
}

// idle moves the clock on.
func (m *modelRun) idle(d time.Duration) {
	m.begin("idle %v", d)
	m.clock.Advance(d)
}

// setLimits stores limits at a level: entity (resource set), entity
// default (resource DefaultResource), resource default (entity ""), or
// system (both ""); nil limits delete them instead (not at the system
// level).
func (m *modelRun) setLimits(entity, resource string, limits []store.Limit) {
	m.t.Helper()
	var key store.ConfigKey
	switch {
	case entity != "":
		key = store.EntityConfig(entity, resource)
	case resource != "":
		key = store.ResourceConfig(resource)
	default:
		key = store.SystemConfig()
	}
	verb := "set"
	if limits == nil {
		verb = "delete"
	}
	m.begin("%s limits %s/%s %s", verb, entity, resource, limitsString(limits))
	var err error
	switch {
	case entity != "" && limits != nil:
		err = m.rl.Admin().SetLimits(m.ctx, limiter.Scope{Entity: entity, Resource: resource}, toCallerLimits(limits))
	case entity != "":
		err = m.rl.Admin().DeleteLimits(m.ctx, limiter.Scope{Entity: entity, Resource: resource})
	case resource != "" && limits != nil:
		err = m.rl.Admin().SetLimits(m.ctx, limiter.Scope{Resource: resource}, toCallerLimits(limits))
	case resource != "":
		err = m.rl.Admin().DeleteLimits(m.ctx, limiter.Scope{Resource: resource})
	default:
		err = m.rl.Admin().SetLimits(m.ctx, limiter.Scope{}, toCallerLimits(limits))
	}
	if err != nil {
		m.fail("%s limits: %v", verb, err)
	}
	if limits == nil {
		delete(m.ref.configs, key)
	} else {
		m.ref.configs[key] = limits
	}
	// Limits stored for an entity's own bucket (on the resource, or its
	// entity-wide one) are written to it at once.
	if entity != "" && (resource == m.resource || resource == store.AllResources) {
		k := store.BucketKey{EntityID: entity, Resource: resource}
		if _, ok := m.ref.items[k]; ok {
			m.expect = map[store.BucketKey][]store.Limit{k: m.ref.resolve(entity, resource)}
		}
	}
	m.afterOp("", nil)
	if entity != "" {
		m.checkAvailable(entity, nil)
	}
}

// quiesce closes the limiter, which writes what background commit still
// holds, checks everything strictly, and opens a new limiter. No lease may
// be open.
func (m *modelRun) quiesce() {
	m.t.Helper()
	m.begin("close and reopen the limiter")
	if err := m.rl.Close(); err != nil {
		m.fail("close: %v", err)
	}
	m.bgPending = false
	m.slack = map[store.BucketKey]map[string]*big.Int{}
	m.checkStore()
	m.rl = m.newLimiter()
}

// finish commits the leases still open and quiesces.
func (m *modelRun) finish() {
	m.t.Helper()
	for len(m.leases) > 0 {
		m.commit(m.leases[0])
	}
	m.quiesce()
}
