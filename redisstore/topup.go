package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/zaelimiter/limiter/store"
)

var _ store.TopUpStore = (*Store)(nil)

// TopUp implements [store.TopUpStore]: one script (lua/topup.lua) that
// checks the id's key, adds to the balance and sets the key, with a
// lifetime until req.ExpiresMs. The key holds a token drawn for the call,
// so that a resend of the call by the client after it applied is answered
// applied, not duplicate.
func (s *Store) TopUp(ctx context.Context, req store.TopUpRequest) (store.TopUpOutcome, error) {
	record := strconv.FormatUint(rand.Uint64(), 36) + "|" + itoa(req.AmountMilli)
	life := max(req.ExpiresMs-req.NowMs, 1)
	v, err := s.run(ctx, scriptTopUp, []string{s.keys.bucket(req.Key), s.keys.topUp(req.Key, req.ID)},
		req.Limit, itoa(req.AmountMilli), itoa(req.NowMs), itoa(life), record, itoa(req.CeilingMilli))
	if err != nil {
		return store.TopUpApplied, err
	}
	switch v {
	case "applied":
		return store.TopUpApplied, nil
	case "duplicate":
		return store.TopUpDuplicate, nil
	case "conflict":
		return store.TopUpConflict, nil
	case "missing", "capacity":
		return store.TopUpApplied, fmt.Errorf("top up %s/%s: %s: %w", req.Key.EntityID, req.Key.Resource, v, store.ErrConditionFailed)
	}
	return store.TopUpApplied, wrap(scriptTopUp.name, errUnexpected)
}
