// Layer 4, mechanics: the administrative methods of the namespace-wide
// system defaults: their limits and on-unavailable mode, the switches of
// their limits' kinds.

package limiter

import (
	"context"
	"fmt"
	"slices"

	"github.com/zaelimiter/limiter/store"
)

// systemChange is what a write of the system config changes: its limits,
// and its on-unavailable mode unless setMode is false (the mode stored
// then stays).
type systemChange struct {
	limits  []store.Limit
	mode    OnUnavailable
	setMode bool
}

// keepOnUnavailable marks a change of the system defaults' limits that
// leaves their on-unavailable mode as stored (see setSystemDefaults).
const keepOnUnavailable OnUnavailable = "\x00keep"

// setSystemDefaults stores the namespace-wide default limits and
// on-unavailable mode; mode keepOnUnavailable changes the limits alone. It
// records a limits_set audit event with the config as written.
func (rl *RateLimiter) setSystemDefaults(ctx context.Context, limits []store.Limit, mode OnUnavailable) error {
	ch := systemChange{limits: limits, mode: mode, setMode: true}
	if mode == keepOnUnavailable {
		ch.mode, ch.setMode = "", false
	}
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := validateStoredLimits(ch.limits); err != nil {
		return err
	}
	if ch.mode != "" && !ch.mode.Valid() {
		return store.NewValidationError(ErrValidation, "on_unavailable", string(ch.mode), "must be 'allow' or 'block'")
	}
	c, err := rl.setSystemConfig(ctx, ch)
	if err != nil {
		return err
	}
	var ou any
	if c.OnUnavailable != "" {
		ou = string(c.OnUnavailable)
	}
	return rl.record(ctx, principal, store.AuditLimitsSet, store.AuditEntitySystem, "",
		map[string]any{"limits": auditLimitDetails(c.Limits), "on_unavailable": ou})
}

// setSystemConfig writes ch over the system config and returns the config
// written,
// with its switch records (those kept, and one per limit that switches
// buckets). A store that writes the config in place
// ([store.SystemConfigWriter]) keeps the attributes another tool keeps on
// its item (the Python library's), and writes on condition that the
// records are those read: one that lost to a concurrent change of them
// (addSystemSwitches) reads the config again and recomputes them, so that
// no record is lost. Another store gets the config written whole.
func (rl *RateLimiter) setSystemConfig(ctx context.Context, ch systemChange) (store.Config, error) {
	key := store.SystemConfig()
	w, inPlace := rl.repo.(store.SystemConfigWriter)
	for range maxSwitchWrites {
		old, _, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return store.Config{}, err
		}
		c := store.Config{Limits: slices.Clone(old.Limits), OnUnavailable: old.OnUnavailable}
		c.Limits = slices.Clone(ch.limits)
		if ch.setMode {
			c.OnUnavailable = ch.mode
		}
		c.Switches, _ = recordSwitches(old.Switches, old.Limits, c.Limits, false, "", rl.nowMs())
		if !inPlace {
			if err := rl.repo.PutConfig(ctx, key, c); err != nil {
				return store.Config{}, err
			}
			rl.configChanged(key)
			return c, nil
		}
		done, err := w.SetSystemConfig(ctx, old, c)
		if err != nil {
			return store.Config{}, err
		}
		if done {
			rl.configChanged(key)
			return c, nil
		}
	}
	return store.Config{}, fmt.Errorf("limiter: the system defaults' switch records changed under %d writes in a row: %w", maxSwitchWrites, store.ErrTransactionConflict)
}

// GetSystemDefaults returns the namespace-wide default limits and
// on-unavailable mode ("" when unset).
func (rl *RateLimiter) getSystemDefaults(ctx context.Context) ([]store.Limit, OnUnavailable, error) {
	if err := checkContext(ctx); err != nil {
		return nil, "", err
	}
	c, _, err := rl.repo.GetConfig(ctx, store.SystemConfig())
	return c.Limits, c.OnUnavailable, err
}

// DeleteSystemDefaults deletes the namespace-wide defaults (the records
// of switches of defaults that the system config keeps stay). It records
// a limits_deleted audit event naming the limits and mode deleted.
func (rl *RateLimiter) deleteSystemDefaults(ctx context.Context) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	old, err := rl.deleteSystemConfig(ctx)
	if err != nil {
		return err
	}
	names := make([]any, len(old.Limits))
	for i, l := range old.Limits {
		names[i] = l.Name
	}
	var ou any
	if old.OnUnavailable != "" {
		ou = string(old.OnUnavailable)
	}
	return rl.record(ctx, principal, store.AuditLimitsDeleted, store.AuditEntitySystem, "", map[string]any{"limits": names, "on_unavailable": ou})
}

// deleteSystemConfig deletes the system defaults (limits and mode) and
// returns them. The switch records the system config holds (those of
// deleted resource defaults and of entities' deleted DefaultResource
// configs, which apply whatever defaults their entities inherit now) are
// kept: deleting them would start those entities' new buckets full. A
// store that writes the config in place ([store.SystemConfigWriter])
// removes the limits and the mode alone, on condition that the records
// are those read (one that lost to a concurrent change of them reads
// again), and keeps what another tool keeps on the item; another store
// gets the records written whole, or the config deleted when none are
// left.
func (rl *RateLimiter) deleteSystemConfig(ctx context.Context) (store.Config, error) {
	key := store.SystemConfig()
	w, inPlace := rl.repo.(store.SystemConfigWriter)
	for range maxSwitchWrites {
		old, ok, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return old, err
		}
		kept, _ := recordSwitches(old.Switches, nil, nil, false, "", rl.nowMs())
		done := true
		switch {
		case inPlace && ok:
			done, err = w.SetSystemConfig(ctx, old, store.Config{Switches: kept})
		case len(kept) > 0:
			err = rl.repo.PutConfig(ctx, key, store.Config{Switches: kept})
		default:
			_, err = rl.repo.DeleteConfig(ctx, key)
		}
		if err != nil {
			return old, err
		}
		if done {
			rl.configChanged(key)
			return old, nil
		}
	}
	return store.Config{}, fmt.Errorf("limiter: the system defaults' switch records changed under %d writes in a row: %w", maxSwitchWrites, store.ErrTransactionConflict)
}

// maxSwitchWrites bounds the attempts of addSystemSwitches: each one lost
// to a concurrent change of the system config's switch records.
const maxSwitchWrites = 8

// addSystemSwitches sets the switch records of the system config to what
// next returns for the config as read (with now), when it says there are
// new ones. A store that writes the records alone
// ([store.ConfigSwitchWriter]: DynamoDB, memory and Redis) writes nothing
// else of the config's item: the attributes another tool keeps there (the
// Python library's) stay. The write is conditioned on the records read:
// one that lost to a concurrent change reads the config again and
// recomputes them. A system config not stored yet is written with the
// records alone through [store.SystemConfigWriter], conditioned the same
// way (and, where the config is one value, on its still being missing),
// so that defaults stored meanwhile stay. Another store gets the config
// written whole.
func (rl *RateLimiter) addSystemSwitches(ctx context.Context, next func(sys store.Config, nowMs int64) ([]store.LimitSwitch, bool)) error {
	key := store.SystemConfig()
	w, alone := rl.repo.(store.ConfigSwitchWriter)
	sw, inPlace := rl.repo.(store.SystemConfigWriter)
	for range maxSwitchWrites {
		sys, ok, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return err
		}
		records, changed := next(sys, rl.nowMs())
		if !changed {
			return nil
		}
		var done bool
		switch {
		case ok && alone:
			done, err = w.SetConfigSwitches(ctx, key, sys.Switches, records)
		case inPlace:
			c := sys
			c.Switches = records
			done, err = sw.SetSystemConfig(ctx, sys, c)
		default:
			sys.Switches = records
			done, err = true, rl.repo.PutConfig(ctx, key, sys)
		}
		if err != nil {
			return err
		}
		if done {
			rl.configChanged(key)
			return nil
		}
	}
	return fmt.Errorf("limiter: the system defaults' switch records changed under %d writes in a row: %w", maxSwitchWrites, store.ErrTransactionConflict)
}

// configChanged makes a config change through this limiter effective for
// its next acquire: the cached slot goes, and so does every over-limit
// entry (its limits may be stale).
func (rl *RateLimiter) configChanged(key store.ConfigKey) {
	rl.configs.evict(key)
	rl.overLimitReset()
}

// recordDeletedDefaults records, in the system config, the switches of the
// deleted defaults old of resource to the system defaults its entities
// inherit now, and the records old kept, for resource alone (see
// carrySwitches and movedSwitches).
func (rl *RateLimiter) recordDeletedDefaults(ctx context.Context, resource string, old store.Config) error {
	if len(old.Limits) == 0 {
		return nil
	}
	return rl.addSystemSwitches(ctx, func(sys store.Config, nowMs int64) ([]store.LimitSwitch, bool) {
		if len(sys.Limits) == 0 {
			return nil, false
		}
		moved := movedSwitches(old.Switches, resource, "")
		sw, added := recordSwitches(append(slices.Clone(sys.Switches), moved...), old.Limits, sys.Limits, false, resource, nowMs)
		return sw, added > 0 || len(moved) > 0
	})
}

// recordDeletedEntityDefaults records, in the system config, the
// definitions of the deleted DefaultResource config old of entityID, and
// the records old kept, for that entity alone (see carrySwitches and
// movedSwitches).
func (rl *RateLimiter) recordDeletedEntityDefaults(ctx context.Context, entityID string, old store.Config) error {
	return rl.addSystemSwitches(ctx, func(sys store.Config, nowMs int64) ([]store.LimitSwitch, bool) {
		moved := movedSwitches(old.Switches, "", entityID)
		sw, _ := recordSwitches(append(slices.Clone(sys.Switches), moved...), nil, nil, false, "", nowMs)
		added := len(moved)
		for _, l := range old.Limits {
			if l.IsPrepaid() || l.IsInFlight() {
				continue
			}
			sw = append(sw, store.LimitSwitch{Name: l.Name, Entity: entityID, From: l, AtMs: nowMs})
			added++
		}
		return sw[max(0, len(sw)-maxSwitches):], added > 0
	})
}
