// Layer 5, administration: top-ups of prepaid balances ([Prepaid]).

package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// TopUpResult is what [RateLimiter.TopUp] did.
type TopUpResult struct {
	// Applied is true when this call added the amount, false when a
	// top-up with the same id had been applied before: nothing was added.
	Applied bool
}

// maxTopUpRounds bounds the attempts of a top-up that finds its balance
// bucket missing (it creates it and tries again) or changed under it.
const maxTopUpRounds = 4

// TopUpRequest is one top-up of a prepaid balance ([RateLimiter.TopUp]).
type TopUpRequest struct {
	// Entity and Resource name the balance's bucket: a resource, or
	// [AllResources] for an entity-wide balance.
	Entity, Resource string
	// Limit is the name of the prepaid limit ("usd", say).
	Limit string
	// Amount is what is added, in the limit's tokens; positive.
	Amount int64
	// ID names the payment: a top-up is applied once per ID.
	ID string
}

// TopUp adds req.Amount (positive, in the limit's tokens) to the prepaid
// balance req.Limit of (req.Entity, req.Resource), exactly once per req.ID: the
// amount and the record of id are written in one atomic step, and a later
// top-up with the same id for the same entity, resource and limit adds
// nothing and returns Applied false with a nil error (so a caller that is
// unsure whether a top-up went through retries it with the same id); with
// another amount it adds nothing and fails with an error matching
// [ErrTopUpConflict] (an id names one payment). An id
// is remembered for the audit retention ([Options.AuditRetention]); it must be
// a valid identifier (the payment's id, say). The limit is resolved as
// Acquire resolves limits (the stored config, or WithLimits in opts) and
// must be a prepaid limit ([Prepaid]). The first top-up creates the
// balance's bucket. A top-up that would lift the balance above the
// limit's capacity is refused with a *[ValidationError]; nothing is added.
// A balance lives on a resource or, entity-wide, on [AllResources];
// resource [DefaultResource] is refused with a *[ValidationError] saying so
// (limits stored there give each resource a balance of its own).
//
// An applied top-up records a balance_topped_up audit event (limit,
// amount, id) after it is written; when that record fails, TopUp returns
// the error with the result Applied true: the amount stays added. TopUp
// needs a repository that implements [store.TopUpStore] (the three
// backends of this module do); others fail with [ErrUnsupported].
func (rl *RateLimiter) TopUp(ctx context.Context, req TopUpRequest, opts ...AcquireOption) (TopUpResult, error) {
	entityID, resource, limitName, amount, id := req.Entity, req.Resource, req.Limit, req.Amount, req.ID
	if ctx == nil {
		return TopUpResult{}, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return TopUpResult{}, err
	}
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return TopUpResult{}, err
	}
	defer rl.exit()
	if err := checkTopUp(entityID, resource, limitName, amount, id); err != nil {
		return TopUpResult{}, err
	}
	ts, ok := rl.repo.(store.TopUpStore)
	if !ok {
		return TopUpResult{}, fmt.Errorf("top up %s/%s: %w", entityID, resource, ErrUnsupported)
	}
	limits, _, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return TopUpResult{}, err
	}
	i := -1
	for j := range limits {
		if limits[j].Name == limitName && limits[j].IsPrepaid() {
			i = j
		}
	}
	if i < 0 {
		return TopUpResult{}, store.NewValidationError(ErrValidation, "limit", limitName,
			fmt.Sprintf("%s on %s has no prepaid limit %q", entityID, resource, limitName))
	}
	l := limits[i]
	bucket, err := l.PrepaidBucket(resource)
	if err != nil {
		return TopUpResult{}, err
	}
	now := rl.nowMs()
	bl := l.PrepaidBucketLimit()
	sreq := store.TopUpRequest{
		Key:               store.BucketKey{EntityID: entityID, Resource: bucket},
		Limit:             l.Name,
		Resource:          resource,
		AmountMilli:       amount * 1000,
		ID:                id,
		CapacityMilli:     bl.Capacity * 1000,
		RefillAmountMilli: bl.RefillAmount * 1000,
		RefillPeriodMs:    bl.RefillPeriod.Milliseconds(),
		CeilingMilli:      bucketmath.SatMul(l.Capacity, 1000),
		NowMs:             now,
		ExpiresMs:         now + rl.auditRetention.Milliseconds(),
	}
	outcome, err := rl.topUp(ctx, ts, sreq, l)
	if err != nil {
		return TopUpResult{}, fmt.Errorf("top up %s/%s %s: %w", entityID, resource, l.Name, err)
	}
	switch outcome {
	case store.TopUpDuplicate:
		return TopUpResult{}, nil
	case store.TopUpConflict:
		return TopUpResult{}, fmt.Errorf("top up %s/%s %s: id %q was applied before with another amount: %w", entityID, resource, l.Name, id, ErrTopUpConflict)
	}
	details := map[string]any{"limit": l.Name, "amount": amount, "topup_id": id}
	if err := rl.record(ctx, principal, store.AuditBalanceTopUp, entityID, resource, details); err != nil {
		return TopUpResult{Applied: true}, fmt.Errorf("top up %s/%s %s applied, its audit event not recorded: %w", entityID, resource, l.Name, err)
	}
	return TopUpResult{Applied: true}, nil
}

// checkTopUp validates the arguments of TopUp.
func checkTopUp(entityID, resource, limitName string, amount int64, id string) error {
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if resource == DefaultResource {
		return store.NewValidationError(ErrInvalidName, "resource", resource,
			"a prepaid balance is kept on a resource or, for one balance on every resource, on AllResources (\"*\"); "+
				"limits stored on DefaultResource give each resource a balance of its own: pass the resource, or AllResources")
	}
	if err := store.ValidateChargedResource(resource); err != nil {
		return err
	}
	if err := store.ValidateLimitName(limitName, "limit"); err != nil {
		return err
	}
	if err := store.ValidateIdentifier(id, "topup_id"); err != nil {
		return err
	}
	if amount <= 0 || amount > math.MaxInt64/1000 {
		return store.NewValidationError(ErrValidation, "amount", fmt.Sprint(amount), "a top-up's amount must be positive and fit in int64 millitokens")
	}
	return nil
}

// topUp writes req, creating the balance's bucket (empty) when the write
// finds it missing, and tells a refusal for want of capacity from a
// bucket changed under it (tried again).
func (rl *RateLimiter) topUp(ctx context.Context, ts store.TopUpStore, req store.TopUpRequest, l store.Limit) (store.TopUpOutcome, error) {
	for round := 0; ; round++ {
		outcome, err := ts.TopUp(ctx, req)
		if !errors.Is(err, store.ErrConditionFailed) {
			return outcome, err
		}
		if round+1 >= maxTopUpRounds {
			return outcome, err
		}
		if err := rl.ensureBalance(ctx, req, l); err != nil {
			return outcome, err
		}
	}
}

// ensureBalance makes sure the balance bucket of req exists and holds its
// limit, creating either empty, and that req's amount fits under the
// capacity: a *ValidationError when it does not.
func (rl *RateLimiter) ensureBalance(ctx context.Context, req store.TopUpRequest, l store.Limit) error {
	ents, buckets, err := rl.store.loadBuckets(ctx, []string{req.Key.EntityID}, []store.BucketKey{req.Key})
	if err != nil {
		return err
	}
	now := rl.nowMs()
	bl := l.PrepaidBucketLimit()
	empty := bucketStateFromLimit(req.Key.EntityID, req.Key.Resource, bl, now)
	b := buckets[req.Key]
	if b == nil {
		w := store.BucketWrite{Kind: store.WriteCreate, Key: req.Key, NowMs: now, ShardCount: 1, States: []store.BucketState{empty}, Incarnation: newIncarnation()}
		if e, ok := ents[req.Key.EntityID]; ok {
			w.Cascade, w.ParentID = e.Cascade, e.ParentID
		}
		if err := rl.store.writeBuckets(ctx, []store.BucketWrite{w}); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return err
		}
		return nil // created, or created by another call: write again
	}
	s, ok := b.State(l.Name)
	if !ok {
		w := store.BucketWrite{Kind: store.WriteSync, Key: req.Key, NowMs: now,
			Limits: []store.LimitWrite{{Name: l.Name, Initial: &empty}}}
		if err := rl.store.writeBuckets(ctx, []store.BucketWrite{w}); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return err
		}
		return nil
	}
	if s.TokensMilli > bucketmath.AddSat(req.CeilingMilli, -req.AmountMilli) {
		return store.NewValidationError(ErrValidation, "amount", fmt.Sprint(req.AmountMilli/1000),
			fmt.Sprintf("the balance of %s (%d) plus the top-up would exceed its capacity %d", l.Name, s.Tokens(), l.Capacity))
	}
	return nil // changed under the write: write again
}
