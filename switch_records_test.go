package limiter

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// TestSwitchRecordsKeepForeignAttributes: the switch records that
// DeleteResourceDefaults and DeleteLimits of DefaultResource add to the
// system config are written with an UpdateItem of their attribute alone
// (conditioned on the records read), on DynamoDB Local: an attribute
// another tool keeps on the system config's item (the Python library, an
// operator's note) survives both, and so do the limits and mode.
func TestSwitchRecordsKeepForeignAttributes(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	defer rl.Close()
	ctx := env.ctx
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetSystemDefaults(ctx, []Limit{PerCalendarDay("usd", 1000).InLocation(kiritimati)}, OnUnavailableBlock))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Resource: "gpt"}, []Limit{PerCalendarDay("usd", 1000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e1", Resource: DefaultResource}, []Limit{PerDay("usd", 500)}))

	sysKey := primaryKey(pkSystem(env.repo.NamespaceID()), skConfig(""))
	_, err = env.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(env.repo.Table()), Key: sysKey,
		UpdateExpression:          aws.String("SET operator_note = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "kept"}},
	})
	require.NoError(t, err)
	foreign := func() string {
		t.Helper()
		v, ok := schemaGetS(env.item(pkSystem(env.repo.NamespaceID()), skConfig("")), "operator_note")
		require.True(t, ok, "the foreign attribute is gone")
		return v
	}

	env.rec.Reset()
	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{Resource: "gpt"}))
	calls := env.calls()
	require.Equal(t, "kept", foreign())
	// The config read and deleted, the registry, the system config read
	// and its records updated, the audit event put.
	require.Equal(t, "GetItem, DeleteItem, UpdateItem, GetItem, UpdateItem, PutItem", calls)
	c, ok, err := env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	require.True(t, ok)
	// gpt's own record (its default set over the system's Kiritimati
	// day) moved to the system config, then the switch of gpt's entities
	// from UTC to Kiritimati.
	require.Len(t, c.Switches, 2, "gpt's own record, and the switch of gpt's entities from UTC to Kiritimati")
	require.Equal(t, "gpt", c.Switches[0].Resource)
	require.Equal(t, "Pacific/Kiritimati", c.Switches[0].From.LocationName())
	require.Equal(t, "gpt", c.Switches[1].Resource)
	require.Equal(t, store.Limit(PerCalendarDay("usd", 1000)), c.Switches[1].From)

	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{Entity: "e1", Resource: DefaultResource}))
	require.Equal(t, "kept", foreign())
	c, _, err = env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	// e1's own record (its first DefaultResource config, over what it
	// inherited) moved, and the switch of e1 from PerDay.
	require.Len(t, c.Switches, 4)
	require.Equal(t, "e1", c.Switches[2].Entity)
	require.True(t, c.Switches[2].Inherited)
	require.Equal(t, "e1", c.Switches[3].Entity)
	require.Equal(t, store.Limit(PerDay("usd", 500)), c.Switches[3].From)
	require.Equal(t, OnUnavailableBlock, c.OnUnavailable)
	require.Len(t, c.Limits, 1)
	require.Equal(t, "Pacific/Kiritimati", c.Limits[0].LocationName())

	// A write conditioned on records that are no longer there writes
	// nothing.
	done, err := env.repo.SetConfigSwitches(ctx, store.SystemConfig(), c.Switches[:1], nil)
	require.NoError(t, err)
	require.False(t, done)
	done, err = env.repo.SetConfigSwitches(ctx, store.SystemConfig(), c.Switches, nil)
	require.NoError(t, err)
	require.True(t, done)
	item := env.item(pkSystem(env.repo.NamespaceID()), skConfig(""))
	require.NotContains(t, item, attrLimitSwitches)
	require.Equal(t, "kept", foreign())
}

// TestSystemDefaultsKeepForeignAttributes: SetSystemDefaults writes the
// system config with one UpdateItem of the attributes it owns (the
// limits' l_{L}_*, on_unavailable, config_version, the index keys,
// limit_switches), on DynamoDB Local: an attribute another tool keeps on
// the item survives it, and so do the switch records already there; a
// limit dropped from the defaults, a zone gone back to UTC and a mode left
// unset are removed from the item, not kept. A write that loses to a
// concurrent change of the records (a DeleteLimits of an entity's
// DefaultResource config between the read and the write) reads again and
// keeps that record. DeleteSystemDefaults then removes the limits and the
// mode alone: the records and the foreign attribute stay.
func TestSystemDefaultsKeepForeignAttributes(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	defer rl.Close()
	ctx := env.ctx
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetSystemDefaults(ctx, []Limit{PerCalendarDay("usd", 1000).InLocation(kiritimati), PerMinute("rpm", 10)}, OnUnavailableBlock))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Resource: "gpt"}, []Limit{PerCalendarDay("usd", 1000)}))
	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{Resource: "gpt"})) // a record for gpt's entities

	ns := env.repo.NamespaceID()
	sysKey := primaryKey(pkSystem(ns), skConfig(""))
	_, err = env.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(env.repo.Table()), Key: sysKey,
		UpdateExpression:          aws.String("SET operator_note = :v, audit_retention_days = :d"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "kept"}, ":d": &types.AttributeValueMemberN{Value: "30"}},
	})
	require.NoError(t, err)
	raw := func() map[string]types.AttributeValue { t.Helper(); return env.item(pkSystem(ns), skConfig("")) }

	env.rec.Reset()
	require.NoError(t, rl.Admin().SetSystemDefaults(ctx, []Limit{PerCalendarDay("usd", 1000)}, ""))
	// The config read, written in place, the audit event put.
	require.Equal(t, "GetItem, UpdateItem, PutItem", env.calls())
	item := raw()
	v, ok := schemaGetS(item, "operator_note")
	require.True(t, ok, "the foreign attribute is gone: %v", item)
	require.Equal(t, "kept", v)
	days, ok, err := schemaGetN(item, "audit_retention_days")
	require.NoError(t, err)
	require.True(t, ok, "audit_retention_days is gone: %v", item)
	require.EqualValues(t, 30, days)
	for _, gone := range []string{"l_rpm_cp", "l_rpm_ra", "l_rpm_rp", "l_usd_tz", "on_unavailable"} {
		require.NotContains(t, item, gone, "SetSystemDefaults left %s", gone)
	}
	for _, kept := range []string{"l_usd_cp", "l_usd_ra", "l_usd_rp", "config_version", "GSI4PK", "GSI4SK"} {
		require.Contains(t, item, kept)
	}
	c, ok, err := env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, storeLimits([]Limit{PerCalendarDay("usd", 1000)}), c.Limits)
	require.Equal(t, OnUnavailable(""), c.OnUnavailable)
	require.Len(t, c.Switches, 3, "gpt's two records kept, and the switch of usd from Kiritimati to UTC")
	require.Equal(t, "gpt", c.Switches[0].Resource)
	require.Equal(t, "gpt", c.Switches[1].Resource)
	require.Equal(t, "", c.Switches[2].Resource)
	require.Equal(t, "Pacific/Kiritimati", c.Switches[2].From.LocationName())
	limits, mode, err := rl.Admin().SystemDefaults(ctx)
	require.NoError(t, err)
	require.Equal(t, []Limit{PerCalendarDay("usd", 1000)}, limits)
	require.Equal(t, OnUnavailable(""), mode)

	// A DeleteLimits of e1's DefaultResource config lands between
	// SetSystemDefaults' read and its write: its record stays.
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e1", Resource: DefaultResource}, []Limit{PerDay("usd", 500)}))
	raced := false
	racer := New(env.repo, func(o *Options) { o.Clock = env.clock.now })
	defer racer.Close()
	sysWrite := func(params any) bool {
		var key map[string]types.AttributeValue
		switch in := params.(type) {
		case *dynamodb.UpdateItemInput:
			key = in.Key
		case *dynamodb.PutItemInput:
			key = in.Item
		}
		pk, _ := schemaGetS(key, attrPK)
		sk, _ := schemaGetS(key, attrSK)
		return pk == pkSystem(ns) && sk == skConfig("")
	}
	hooked := New(env.withClient(hook(func(op string, params any) error {
		if !raced && sysWrite(params) {
			raced = true
			require.NoError(t, racer.Admin().DeleteLimits(ctx, Scope{Entity: "e1", Resource: DefaultResource}))
		}
		return nil
	})), func(o *Options) { o.Clock = env.clock.now })
	defer hooked.Close()
	require.NoError(t, hooked.Admin().SetSystemDefaults(ctx, []Limit{PerCalendarDay("usd", 1000)}, OnUnavailableAllow))
	require.True(t, raced)
	c, _, err = env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	require.Equal(t, OnUnavailableAllow, c.OnUnavailable)
	require.Len(t, c.Switches, 5, "the records DeleteLimits added meanwhile are kept: %+v", c.Switches)
	require.Equal(t, "e1", c.Switches[3].Entity)
	require.Equal(t, "e1", c.Switches[4].Entity)
	v, _ = schemaGetS(raw(), "operator_note")
	require.Equal(t, "kept", v)

	// DeleteSystemDefaults removes the limits and the mode alone.
	env.rec.Reset()
	require.NoError(t, rl.Admin().DeleteLimits(ctx, Scope{}))
	require.Equal(t, "GetItem, UpdateItem, PutItem", env.calls())
	item = raw()
	v, _ = schemaGetS(item, "operator_note")
	require.Equal(t, "kept", v)
	for _, gone := range []string{"l_usd_cp", "l_usd_ra", "l_usd_rp", "on_unavailable"} {
		require.NotContains(t, item, gone, "DeleteSystemDefaults left %s", gone)
	}
	c, ok, err = env.repo.GetConfig(ctx, store.SystemConfig())
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, c.Limits)
	require.Len(t, c.Switches, 5, "the records stay")
}
