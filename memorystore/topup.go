package memorystore

import (
	"context"
	"fmt"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// topUpKey identifies an applied top-up: its id, for one entity, resource
// and limit.
type topUpKey struct {
	entityID, resource, limit, id string
}

// topUpRecord is what the store keeps of an applied top-up: its amount
// (millitokens) and when it may be forgotten (epoch ms).
type topUpRecord struct {
	amountMilli, expiresMs int64
}

// TopUp implements [store.TopUpStore]: under the store's lock, the id is
// looked up, the amount added to the stored balance when it stays within
// req.CeilingMilli (the refill timestamp stays: the refill of a prepaid
// balance's bucket is negligible and capped far above its balance), and
// the id kept until req.ExpiresMs.
func (m *Store) TopUp(ctx context.Context, req store.TopUpRequest) (store.TopUpOutcome, error) {
	if err := ctx.Err(); err != nil {
		return store.TopUpApplied, err
	}
	k := topUpKey{entityID: req.Key.EntityID, resource: req.Resource, limit: req.Limit, id: req.ID}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, ok := m.topUps[k]; ok && rec.expiresMs > req.NowMs {
		if rec.amountMilli != req.AmountMilli {
			return store.TopUpConflict, nil
		}
		return store.TopUpDuplicate, nil
	}
	b := m.buckets[req.Key]
	if b == nil || b.Expired(req.NowMs) {
		return store.TopUpApplied, fmt.Errorf("top up %s: no balance bucket: %w", req.Key.Resource, store.ErrConditionFailed)
	}
	i := index(b, req.Limit)
	if i < 0 {
		return store.TopUpApplied, fmt.Errorf("top up %s: no limit %s: %w", req.Key.Resource, req.Limit, store.ErrConditionFailed)
	}
	s := &b.States[i]
	if s.TokensMilli > bucketmath.AddSat(req.CeilingMilli, -req.AmountMilli) {
		return store.TopUpApplied, fmt.Errorf("top up %s: over capacity: %w", req.Key.Resource, store.ErrConditionFailed)
	}
	s.TokensMilli += req.AmountMilli
	m.topUps[k] = topUpRecord{amountMilli: req.AmountMilli, expiresMs: req.ExpiresMs}
	if len(m.topUps) > 2*max(m.topUpsSwept, 512) {
		for k, rec := range m.topUps {
			if rec.expiresMs <= req.NowMs {
				delete(m.topUps, k)
			}
		}
		m.topUpsSwept = len(m.topUps)
	}
	return store.TopUpApplied, nil
}
