// Layer 5, the DynamoDB repository: items and update expressions in and out
// of this package's types.

package limiter

// Bucket, entity and config items in this package's types: thin
// conversions over internal/ddbschema, which owns the layout.

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// ---------------------------------------------------------------------------
// Bucket items: PK {ns}/BUCKET#{id}#{res}#{shard}, SK #STATE.

// bucketItem returns the full item of bucket b in namespace ns, for a
// create (a PutItem guarded by attribute_not_exists(PK)). The hidden wcu
// limit is written from b's wcu state, or from a state of States named
// wcu, else as a full bucket. ShardCount zero is written as 1; TTL zero
// writes no ttl attribute and ParentID "" no parent_id attribute.
func bucketItem(ns string, b *store.Bucket) map[string]types.AttributeValue {
	limits := make([]ddbschema.BucketLimit, 0, len(b.States)+1)
	for _, s := range b.States {
		limits = append(limits, bucketLimit(s))
	}
	if wcuOf(b) != nil {
		limits = append(limits, bucketLimit(*wcuOf(b)))
	}
	return ddbschema.BucketItem(ddbschema.Bucket{
		Namespace:   ns,
		EntityID:    b.Key.EntityID,
		Resource:    b.Key.Resource,
		Shard:       b.Key.Shard,
		ShardCount:  b.ShardCount,
		RefillMs:    b.RefillMs,
		Cascade:     b.Cascade,
		ParentID:    b.ParentID,
		TTL:         b.TTL,
		Incarnation: b.Incarnation,
		Limits:      limits,
	})
}

func bucketLimit(s store.BucketState) ddbschema.BucketLimit {
	return ddbschema.BucketLimit{
		Name:               s.LimitName,
		TokensMilli:        s.TokensMilli,
		CapacityMilli:      s.CapacityMilli,
		RefillAmountMilli:  s.RefillAmountMilli,
		RefillPeriodMs:     s.RefillPeriodMs,
		TotalConsumedMilli: s.TotalConsumedMilli,
	}
}

// bucketFromItem reads a bucket item: its namespace and the bucket, whose
// States hold one state per limit, sorted by name, each with the item's
// entity, resource and shard and LastRefillMs = rf. The hidden wcu limit
// goes to the unexported wcu field, not to States.
func bucketFromItem(item map[string]types.AttributeValue) (string, *store.Bucket, error) {
	d, err := ddbschema.BucketFromItem(item)
	if err != nil {
		return "", nil, err
	}
	// The bucket, its states and what only this backend reads of them in
	// one allocation (every acquire reads one), the wcu state after the
	// others in the same array.
	var b *store.Bucket
	var states []store.BucketState
	var x *itemExtras
	if len(d.Limits) <= len(bucketBlock{}.states) {
		blk := &bucketBlock{}
		b, states, x = &blk.b, blk.states[:0:len(d.Limits)], &blk.extras
		x.exact = blk.exact[:0:len(d.Limits)]
	} else {
		b, states, x = &store.Bucket{}, make([]store.BucketState, 0, len(d.Limits)), &itemExtras{}
		x.exact = make([]exactState, 0, len(d.Limits))
	}
	*b = store.Bucket{
		Key:         store.BucketKey{EntityID: d.EntityID, Resource: d.Resource, Shard: d.Shard},
		ShardCount:  max(d.ShardCount, 1),
		RefillMs:    d.RefillMs,
		Cascade:     d.Cascade,
		ParentID:    d.ParentID,
		TTL:         d.TTL,
		Incarnation: d.Incarnation,
		Private:     x,
	}
	x.newestID, x.priorID = ddbschema.NewestWriteIDs(item)
	var wcu store.BucketState
	hasWCU := false
	for _, l := range d.Limits {
		s := store.BucketState{
			EntityID:           d.EntityID,
			Resource:           d.Resource,
			LimitName:          l.Name,
			ShardID:            d.Shard,
			TokensMilli:        l.TokensMilli,
			LastRefillMs:       d.RefillMs,
			CapacityMilli:      l.CapacityMilli,
			RefillAmountMilli:  l.RefillAmountMilli,
			RefillPeriodMs:     l.RefillPeriodMs,
			TotalConsumedMilli: l.TotalConsumedMilli,
		}
		if s.LimitName == wcuLimitName {
			wcu, hasWCU = s, true
			continue
		}
		states = append(states, s)
		x.exact = append(x.exact, exactState{valid: l.ExactValid(), fullAtMs: l.FullAtMs})
	}
	// States ends where the wcu state starts: appending to it copies.
	b.States = states[:len(states):len(states)]
	if hasWCU {
		states = append(states, wcu)
		x.wcu = &states[len(states)-1]
	}
	return d.Namespace, b, nil
}

// bucketBlock is a bucket and room for its states (two limits and wcu, and
// one more) and for what only this backend reads of them.
type bucketBlock struct {
	b      store.Bucket
	states [4]store.BucketState
	extras itemExtras
	exact  [4]exactState
}

// ---------------------------------------------------------------------------
// Entity metadata: PK {ns}/ENTITY#{id}, SK #META.

// entityItem returns the entity metadata item (see ddbschema.EntityItem).
// CreatedAt is set by the caller, normally to now.
func entityItem(ns string, e Entity) map[string]types.AttributeValue {
	return ddbschema.EntityItem(ns, ddbschema.Entity{
		ID:        e.ID,
		Name:      e.Name,
		ParentID:  e.ParentID,
		Cascade:   e.Cascade,
		Metadata:  e.Metadata,
		CreatedAt: e.CreatedAt,
	})
}

// entityFromItem reads an entity metadata item (see
// ddbschema.EntityFromItem).
func entityFromItem(item map[string]types.AttributeValue) Entity {
	e := ddbschema.EntityFromItem(item)
	return Entity{
		ID:        e.ID,
		Name:      e.Name,
		ParentID:  e.ParentID,
		Cascade:   e.Cascade,
		Metadata:  e.Metadata,
		CreatedAt: e.CreatedAt,
	}
}

// ---------------------------------------------------------------------------
// Config items. Limits are stored as l_{L}_cp / l_{L}_ra (tokens) and
// l_{L}_rp (SECONDS); a calendar limit as ra 0, rp −1 (day), −2 (week) or
// −3 (month), and l_{L}_tz (its IANA zone, omitted for UTC); a prepaid
// limit as ra 0 and rp −4.

// configLimits converts limits to their stored form.
func configLimits(limits []store.Limit) []ddbschema.ConfigLimit {
	out := make([]ddbschema.ConfigLimit, len(limits))
	for i, l := range limits {
		out[i] = ddbschema.ConfigLimit{
			Name:                l.Name,
			Capacity:            l.Capacity,
			RefillAmount:        l.RefillAmount,
			RefillPeriodSeconds: l.RefillPeriodSeconds(),
		}
		if l.IsCalendar() {
			// ra 0 and a negative rp: the Python original refuses the
			// config instead of misreading it.
			out[i].RefillAmount, out[i].RefillPeriodSeconds = 0, l.Calendar.StoredRefillPeriod()
			out[i].TimeZone = l.LocationName()
		}
		if l.IsPrepaid() {
			// Likewise: ra 0 and rp −4, which the original refuses.
			out[i].RefillAmount, out[i].RefillPeriodSeconds = 0, store.StoredRefillPeriodPrepaid
		}
		if l.IsInFlight() {
			// Likewise: ra 0 and rp −5.
			out[i].RefillAmount, out[i].RefillPeriodSeconds = 0, store.StoredRefillPeriodInFlight
		}
	}
	return out
}

// entityConfigItem returns the config item of an entity for resource (which
// may be [DefaultResource]): PK {ns}/ENTITY#{id}, SK #CONFIG#{res}.
func entityConfigItem(ns, entityID, resource string, limits []store.Limit) map[string]types.AttributeValue {
	return ddbschema.EntityConfigItem(ns, entityID, resource, configLimits(limits))
}

// resourceConfigItem returns the default config of a resource: PK
// {ns}/RESOURCE#{res}, SK #CONFIG.
func resourceConfigItem(ns, resource string, limits []store.Limit) map[string]types.AttributeValue {
	return ddbschema.ResourceConfigItem(ns, resource, configLimits(limits))
}

// systemConfigItem returns the system config: PK {ns}/SYSTEM#, SK #CONFIG,
// with on_unavailable only when onUnavailable is not "".
func systemConfigItem(ns string, limits []store.Limit, onUnavailable OnUnavailable) map[string]types.AttributeValue {
	return ddbschema.SystemConfigItem(ns, configLimits(limits), string(onUnavailable))
}

// limitsFromItem reads the limits of any config item (entity, resource or
// system), one per l_{L}_cp attribute, sorted by name. A missing field reads
// as 0, so an incomplete or otherwise invalid stored
// limit is an error (wrapping the *[ValidationError]). An item without
// limits yields an empty slice: "no config at this level".
func limitsFromItem(item map[string]types.AttributeValue) ([]store.Limit, error) {
	names := ddbschema.ConfigLimitNames(item)
	limits := make([]store.Limit, 0, len(names))
	for _, name := range names {
		c, err := ddbschema.ConfigLimitFromItem(item, name)
		if err != nil {
			return nil, err
		}
		if c.RefillPeriodSeconds > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("config limit %s: refill period %d s out of range", name, c.RefillPeriodSeconds)
		}
		l := store.Limit{Name: name, Capacity: c.Capacity, RefillAmount: c.RefillAmount, RefillPeriod: time.Duration(c.RefillPeriodSeconds) * time.Second}
		switch {
		case c.RefillPeriodSeconds == store.StoredRefillPeriodInFlight && c.TimeZone == "":
			l = store.Limit{Name: name, Capacity: c.Capacity, RefillAmount: c.RefillAmount, InFlight: true}
		case c.RefillPeriodSeconds == store.StoredRefillPeriodPrepaid && c.TimeZone == "":
			l = store.Limit{Name: name, Capacity: c.Capacity, RefillAmount: c.RefillAmount, Prepaid: true}
		case c.RefillPeriodSeconds < 0:
			var err error
			if l, err = calendarLimitFromConfig(c); err != nil {
				return nil, fmt.Errorf("config limit %s: %w", name, err)
			}
		case c.TimeZone != "":
			return nil, fmt.Errorf("config limit %s: %w", name, store.NewValidationError(ErrValidation, "location", c.TimeZone, "only a calendar limit has a time zone"))
		}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("config limit %s: %w", name, err)
		}
		limits = append(limits, l)
	}
	return limits, nil
}

// calendarLimitFromConfig decodes a calendar limit stored with a negative
// refill period (its period's code), refill amount 0 and its zone.
func calendarLimitFromConfig(c ddbschema.ConfigLimit) (store.Limit, error) {
	p, err := store.CalendarFromStoredRefillPeriod(c.RefillPeriodSeconds)
	if err != nil {
		return store.Limit{}, err
	}
	loc, err := store.LoadCalendarLocation(c.TimeZone)
	if err != nil {
		return store.Limit{}, err
	}
	return store.Limit{Name: c.Name, Capacity: c.Capacity, RefillAmount: c.RefillAmount, Calendar: p, Location: loc}, nil
}

// onUnavailableFromItem returns the system config's on_unavailable, or ""
// when it is absent or empty. The value is returned as stored; check it with
// [OnUnavailable.Valid].
func onUnavailableFromItem(item map[string]types.AttributeValue) OnUnavailable {
	return OnUnavailable(ddbschema.OnUnavailableFromItem(item))
}

// resourceRegistryFromItem returns the sorted resource names of the
// resource registry ({ns}/SYSTEM#, #RESOURCES).
func resourceRegistryFromItem(item map[string]types.AttributeValue) []string {
	return ddbschema.ResourceRegistryFromItem(item)
}

// entityConfigRegistryFromItem returns, sorted, the resources of the
// entity-config registry ({ns}/SYSTEM#, #ENTITY_CONFIG_RESOURCES) whose
// count of entity configs is positive.
func entityConfigRegistryFromItem(item map[string]types.AttributeValue) ([]string, error) {
	return ddbschema.EntityConfigRegistryFromItem(item)
}

// The version record, the namespace registry, audit events and usage
// snapshots in this package's types: thin conversions over
// internal/ddbschema, which owns the layout.

// ---------------------------------------------------------------------------
// Version record: PK _/SYSTEM#, SK #VERSION.

// versionRecord is the table-level version record as stored (the same
// fields as [VersionRecord]).
type versionRecord = ddbschema.Version

// versionItem returns the version record item. Empty LambdaVersion and
// UpdatedBy are written as NULL.
func versionItem(v versionRecord) map[string]types.AttributeValue { return ddbschema.VersionItem(v) }

// versionFromItem reads the version record; absent attributes read as "".
func versionFromItem(item map[string]types.AttributeValue) versionRecord {
	return ddbschema.VersionFromItem(item)
}

// ---------------------------------------------------------------------------
// Namespace registry: PK _/SYSTEM#, forward SK #NAMESPACE#{name}, reverse
// SK #NSID#{id}.

// Namespace record statuses. Forward records are only ever active.
const (
	namespaceActive  = ddbschema.NamespaceActive
	namespaceDeleted = ddbschema.NamespaceDeleted
	namespacePurging = ddbschema.NamespacePurging
)

// namespaceRecord is a forward or reverse namespace registry record.
type namespaceRecord = ddbschema.Namespace

// namespaceForwardItem returns the name → id record `#NAMESPACE#{name}`.
func namespaceForwardItem(r namespaceRecord) map[string]types.AttributeValue {
	return ddbschema.NamespaceForwardItem(r)
}

// namespaceReverseItem returns the id → name record `#NSID#{id}`, with
// deleted_at when DeletedAt is set.
func namespaceReverseItem(r namespaceRecord) map[string]types.AttributeValue {
	return ddbschema.NamespaceReverseItem(r)
}

// namespaceFromItem reads a forward or reverse registry record.
func namespaceFromItem(item map[string]types.AttributeValue) namespaceRecord {
	return ddbschema.NamespaceFromItem(item)
}

// ---------------------------------------------------------------------------
// Audit events: PK {ns}/AUDIT#{entity}, SK #AUDIT#{event id}.

// auditItem returns the audit event item (see ddbschema.AuditItem). ttl is
// in epoch seconds (now + retention). A [Limit] in the details is stored as
// the map of [auditLimitDetail]; a non-finite
// float is an error.
func auditItem(ns string, e AuditEvent, ttl int64) (map[string]types.AttributeValue, error) {
	return ddbschema.AuditItem(ns, ddbschema.AuditEvent(e), ttl, auditDetailConverter)
}

// auditDetailConverter stores a [Limit] in audit details as the map of
// [auditLimitDetail].
func auditDetailConverter(v any) (any, bool) {
	switch l := v.(type) {
	case store.Limit:
		return auditLimitDetail(l), true
	case Limit:
		return auditLimitDetail(store.Limit(l)), true
	}
	return nil, false
}

// The root's models and ddbschema's item structs have the same fields, so
// they convert directly.

// auditEventFromItem reads an audit event item (see
// ddbschema.AuditEventFromItem). ok is false for items without a string
// action, which are not audit events and are skipped.
func auditEventFromItem(item map[string]types.AttributeValue) (AuditEvent, bool, error) {
	e, ok, err := ddbschema.AuditEventFromItem(item)
	if err != nil || !ok {
		return AuditEvent{}, ok, err
	}
	return AuditEvent(e), true, nil
}

// ---------------------------------------------------------------------------
// Usage snapshots: PK {ns}/ENTITY#{id}, SK #USAGE#{res}#{window key}#{window type}.

// usageSnapshotItem returns the snapshot item for s with the given ttl
// (epoch seconds), the item the aggregator's update creates (see
// ddbschema.UsageSnapshotItem).
func usageSnapshotItem(ns string, s UsageSnapshot, ttl int64) map[string]types.AttributeValue {
	return ddbschema.UsageSnapshotItem(ns, ddbschema.UsageSnapshot(s), ttl)
}

// usageSnapshotFromItem reads a snapshot item (see
// ddbschema.UsageSnapshotFromItem). ok is false for items that are not
// usage snapshots, which are skipped.
func usageSnapshotFromItem(item map[string]types.AttributeValue) (UsageSnapshot, bool, error) {
	s, ok, err := ddbschema.UsageSnapshotFromItem(item)
	if err != nil || !ok {
		return UsageSnapshot{}, ok, err
	}
	return UsageSnapshot(s), true, nil
}

// The requests of bucket writes ([store.BucketWrite]) on the DynamoDB layout of
// internal/ddbschema.

// exprBuilder accumulates an expression's attribute names and values with
// index-based placeholders (#a0, :v0), so that limit names containing '-' or
// '.' are safe (see ddbschema.Expr).
type exprBuilder struct {
	e *ddbschema.Expr
}

func newExprBuilder() *exprBuilder { return &exprBuilder{e: ddbschema.NewExpr()} }

// name returns the placeholder of attribute name n.
func (b *exprBuilder) name(n string) string { return b.e.Name(n) }

// value returns a new placeholder for v.
func (b *exprBuilder) value(v types.AttributeValue) string { return b.e.Value(v) }

// n returns a new placeholder for the number v.
func (b *exprBuilder) n(v int64) string { return b.e.N(v) }

// update returns the transactional Update of key in table with update
// expression expr and the conditions conds joined by AND.
func (b *exprBuilder) update(table string, key map[string]types.AttributeValue, expr string, conds []string) *types.Update {
	return b.e.Update(table, key, expr, conds)
}

// updateExpr joins SET, ADD and REMOVE clauses.
func updateExpr(set, add, remove []string) string { return ddbschema.UpdateExpr(set, add, remove) }

// initLimitClauses returns the SET clauses that initialise a limit missing
// from an existing item: tk from tk (an expression), cp/ra/rp kept
// when already stored (e.g. synced by SetLimits) or set from initial.
func (b *exprBuilder) initLimitClauses(name, tkExpr string, initial *store.BucketState) []string {
	set := []string{b.name(bucketAttr(name, fieldTokens)) + " = " + tkExpr}
	for _, f := range []struct {
		field string
		v     int64
	}{
		{fieldCapacity, initial.CapacityMilli},
		{fieldRefillAmount, initial.RefillAmountMilli},
		{fieldRefillPeriod, initial.RefillPeriodMs},
	} {
		a := b.name(bucketAttr(name, f.field))
		set = append(set, a+" = if_not_exists("+a+", "+b.n(f.v)+")")
	}
	return set
}

// buildBucketWrite returns w as a transactional write item (exactly one of
// Put or Update set), for table and namespace ns.
func buildBucketWrite(table, ns string, w store.BucketWrite) types.TransactWriteItem {
	key := bucketPrimaryKey(ns, w.Key.EntityID, w.Key.Resource, w.Key.Shard)
	switch w.Kind {
	case store.WriteCreate:
		spec := &store.Bucket{
			Key:         w.Key,
			ShardCount:  w.ShardCount,
			RefillMs:    w.NowMs,
			Cascade:     w.Cascade,
			ParentID:    w.ParentID,
			Incarnation: w.Incarnation,
			States:      w.States,
		}
		if w.TTL == store.TTLSet {
			spec.TTL = ttlEpochSeconds(w.NowMs, w.TTLSeconds)
		}
		b := newExprBuilder()
		return types.TransactWriteItem{Put: &types.Put{
			TableName:                aws.String(table),
			Item:                     bucketItem(ns, spec),
			ConditionExpression:      aws.String("attribute_not_exists(" + b.name(attrPK) + ")"),
			ExpressionAttributeNames: b.e.Names(),
		}}
	case store.WriteNormal:
		return types.TransactWriteItem{Update: buildNormalUpdate(table, key, w)}
	case store.WriteRetry:
		// A retry is an exact write from the item as last seen, which
		// only DynamoDBRepository.writeRetries has: nothing is built
		// here (a request with neither Put nor Update fails).
		return types.TransactWriteItem{}
	default:
		return types.TransactWriteItem{Update: buildAdjustUpdate(table, key, w)}
	}
}

// buildNormalUpdate is the read-then-write path's write: refill and
// consume under the rf optimistic lock, with a floor guard per limit whose
// consumption exceeds its refill (concurrent speculative writes drain tk
// without moving rf).
//
// It also writes each limit's exact state (see ddbschema.BucketLimit) for
// the balance it computed from w.Base: ts is set to that balance, and fa
// and fp to the time it is full; so that they hold, the write is also
// conditioned on each such limit's balance being the one read (a
// concurrent take makes it fail, and the limiter's retry takes from the
// balance as it is now). A limit created here, or one w.Base lacks, gets
// no fa.
//
// When w.Base says every limit of the item (wcu too) is full by now and w
// writes each of them (normalFull), the balances it leaves do not depend
// on those read: it sets them, conditioned on every limit still being full
// (ddbschema.FullLadder) instead of on rf and the balances read, so that
// the writes of others since the read do not refuse it.
func buildNormalUpdate(table string, key map[string]types.AttributeValue, w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	rf := b.name(attrRefill)
	set := []string{rf + " = " + b.n(w.NowMs)}
	var add, remove []string
	full := normalFull(w)
	var conds []string
	if !full {
		conds = append(conds, rf+" = "+b.n(w.ExpectedRefillMs))
	}
	conds = append(conds, b.incarnationCond(w.Incarnation))
	ladder := func(tk string, s *store.BucketState) string {
		var rungs []string
		ddbschema.FullLadder(w.Base.RefillMs, w.NowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs, func(rfMax, tkMin int64, exact bool) {
			op := " >= "
			if exact {
				op = " = "
			}
			rungs = append(rungs, "("+rf+" <= "+b.n(rfMax)+" AND "+tk+op+b.n(tkMin)+")")
		})
		if len(rungs) == 1 {
			return rungs[0] // DynamoDB refuses redundant parentheses
		}
		return "(" + strings.Join(rungs, " OR ") + ")"
	}
	if wcu := wcuOf(w.Base); full {
		// The wcu limit, refilled to now, is full: its balance is its
		// capacity, whatever the refill credit w carries.
		wtk := b.name(bucketAttr(wcuLimitName, fieldTokens))
		set = append(set, wtk+" = "+b.n(wcu.CapacityMilli))
		conds = append(conds, ladder(wtk, wcu))
	}
	switch w.TTL {
	case store.TTLSet:
		set = append(set, b.name(attrTTL)+" = "+b.n(ttlEpochSeconds(w.NowMs, w.TTLSeconds)))
	case store.TTLRemove:
		remove = append(remove, b.name(attrTTL))
	}
	if w.RefreshEntity {
		set = append(set, b.name(attrCascade)+" = "+b.value(schemaBool(w.Cascade)))
		if w.ParentID != "" {
			set = append(set, b.name(attrParentID)+" = "+b.value(schemaS(w.ParentID)))
		} else {
			remove = append(remove, b.name(attrParentID))
		}
	}
	for _, l := range w.Limits {
		if l.Name == wcuLimitName && full {
			continue // set above
		}
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		tc := b.name(bucketAttr(l.Name, fieldTotalConsumed))
		if l.Initial != nil {
			ts, fa := b.name(bucketAttr(l.Name, fieldShadow)), b.name(bucketAttr(l.Name, fieldFullAt))
			v := b.n(l.Initial.TokensMilli - l.ConsumedMilli)
			set = append(set, b.initLimitClauses(l.Name, v, l.Initial)...)
			set = append(set, ts+" = "+v)
			remove = append(remove, fa) // its parameters may be kept: no fa
			add = append(add, tc+" "+b.n(l.ConsumedMilli))
			conds = append(conds, "attribute_not_exists("+tk+")")
			continue
		}
		p, based := w.Base.State(l.Name)
		if full {
			set = append(set, tk+" = "+b.n(bucketmath.AddSat(p.TokensMilli, bucketmath.AddSat(l.RefillMilli, -l.ConsumedMilli))))
			add = append(add, tc+" "+b.n(l.ConsumedMilli))
		} else {
			add = append(add, tk+" "+b.n(l.RefillMilli-l.ConsumedMilli), tc+" "+b.n(l.ConsumedMilli))
		}
		if floor := l.ConsumedMilli - l.RefillMilli; floor > 0 && !based {
			conds = append(conds, tk+" >= "+b.n(floor))
		}
		if l.Name == wcuLimitName {
			continue // the hidden limit keeps no exact state
		}
		if l.Params != nil { // a limit change
			p.CapacityMilli, p.RefillAmountMilli, p.RefillPeriodMs = l.Params.CapacityMilli, l.Params.RefillAmountMilli, l.Params.RefillPeriodMs
			set = append(set,
				b.name(bucketAttr(l.Name, fieldCapacity))+" = "+b.n(p.CapacityMilli),
				b.name(bucketAttr(l.Name, fieldRefillAmount))+" = "+b.n(p.RefillAmountMilli),
				b.name(bucketAttr(l.Name, fieldRefillPeriod))+" = "+b.n(p.RefillPeriodMs))
		}
		fa := b.name(bucketAttr(l.Name, fieldFullAt))
		if !based {
			remove = append(remove, fa)
			continue
		}
		balance := bucketmath.AddSat(p.TokensMilli, bucketmath.AddSat(l.RefillMilli, -l.ConsumedMilli))
		set = append(set, b.name(bucketAttr(l.Name, fieldShadow))+" = "+b.n(balance))
		if full {
			conds = append(conds, ladder(tk, &p)) // full by now: the balance covers the write
		} else {
			conds = append(conds, tk+" = "+b.n(p.TokensMilli)) // also the floor guard: the balance read covers the write
		}
		if sig, ok := ddbschema.ParamsSig(p.CapacityMilli, p.RefillAmountMilli, p.RefillPeriodMs); ok {
			set = append(set, fa+" = "+b.n(bucketmath.StoredFullAtMs(balance, w.NowMs, p.CapacityMilli, p.RefillAmountMilli, p.RefillPeriodMs)),
				b.name(bucketAttr(l.Name, fieldParams))+" = "+b.value(&types.AttributeValueMemberN{Value: sig}))
		} else {
			remove = append(remove, fa)
		}
	}
	return b.update(table, key, updateExpr(set, add, remove), conds)
}

// buildAdjustUpdate is an adjustment's write: ADDs of tk -= delta,
// tc += delta, conditioned only on the item existing, so that a refund to
// an expired bucket does not leave a stub item without capacity
// attributes. Each limit's copy ts moves with tk, and a
// refund removes its fa (see adjustExact).
func buildAdjustUpdate(table string, key map[string]types.AttributeValue, w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	var add, remove []string
	for _, l := range w.Limits {
		v := b.n(-l.ConsumedMilli)
		xa, xr, _ := adjustExact(b, l.Name, v, l.ConsumedMilli, nil)
		add = append(append(add,
			b.name(bucketAttr(l.Name, fieldTokens))+" "+v,
			b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli)), xa...)
		remove = append(remove, xr...)
	}
	return b.update(table, key, updateExpr(nil, add, remove), []string{"attribute_exists(" + b.name(attrPK) + ")", b.incarnationCond(w.Incarnation)})
}

// incarnationCond is the condition that the item's incarnation is inc:
// the inc attribute equals it, or (inc zero) the item has none. It also
// requires the item to exist when inc is not zero.
func (b *exprBuilder) incarnationCond(inc int64) string {
	if inc == 0 {
		return "attribute_not_exists(" + b.name(ddbschema.AttrIncarnation) + ")"
	}
	return b.name(ddbschema.AttrIncarnation) + " = " + b.n(inc)
}

// bucketFromDynamoDB converts a bucket item (see bucketFromItem).
func bucketFromDynamoDB(item map[string]types.AttributeValue) (*store.Bucket, error) {
	_, b, err := bucketFromItem(item)
	if err != nil {
		return nil, fmt.Errorf("read bucket item: %w", err)
	}
	return b, nil
}

// adjustExact returns the clauses that keep a limit's exact state (see
// ddbschema.BucketLimit) through an adjustment of consumed millitokens
// (tk moves by −consumed): its copy ts moves alike (by the placeholder
// v of −consumed); a charge leaves fa, which stays a lower bound of the
// time the limit is full; a refund moves fa earlier by what it may
// advance that time, computed from the refill amount and period of s
// (conditioned on: conds), or removes fa when s is nil.
func adjustExact(b *exprBuilder, name, v string, consumed int64, s *store.BucketState) (add, remove, conds []string) {
	add = []string{b.name(bucketAttr(name, fieldShadow)) + " " + v}
	if consumed >= 0 {
		return add, nil, nil
	}
	fa := b.name(bucketAttr(name, fieldFullAt))
	if s == nil {
		return add, []string{fa}, nil
	}
	add = append(add, fa+" "+b.n(-bucketmath.GiveDelayMs(-consumed, s.RefillAmountMilli, s.RefillPeriodMs)))
	conds = []string{
		b.name(bucketAttr(name, fieldRefillAmount)) + " = " + b.n(s.RefillAmountMilli),
		b.name(bucketAttr(name, fieldRefillPeriod)) + " = " + b.n(s.RefillPeriodMs),
	}
	return add, nil, conds
}

// normalFull reports whether the normal write w may be a full one (see
// buildNormalUpdate): w.Base says every limit of the item, wcu too, is
// full by w.NowMs, the item has at most maxFullLimits of them, and w
// writes each exactly once, none created or changed.
func normalFull(w store.BucketWrite) bool {
	if w.Base == nil || len(w.Base.States) > maxFullLimits || !fullBy(w.Base, w.NowMs) {
		return false
	}
	n := 0
	for _, l := range w.Limits {
		switch {
		case l.Name == wcuLimitName:
			continue
		case l.Initial != nil || l.Params != nil:
			return false
		}
		if _, ok := w.Base.State(l.Name); !ok {
			return false
		}
		n++
	}
	if n != len(w.Base.States) {
		return false
	}
	for _, s := range w.Base.States {
		found := 0
		for _, l := range w.Limits {
			if l.Name == s.LimitName {
				found++
			}
		}
		if found != 1 {
			return false
		}
	}
	return true
}

// fullBy reports whether every limit of base, its wcu limit too, is full
// by now (refilled to now, its balance is its capacity), and now lies
// after base's rf.
func fullBy(base *store.Bucket, now int64) bool {
	wcu := wcuOf(base)
	if wcu == nil || now <= base.RefillMs {
		return false
	}
	full := func(s *store.BucketState) bool {
		tk, _ := bucketmath.Refill(s.TokensMilli, base.RefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		return tk == s.CapacityMilli
	}
	if !full(wcu) {
		return false
	}
	for i := range base.States {
		if !full(&base.States[i]) {
			return false
		}
	}
	return true
}

// maxFullLimits bounds the limits of an item written by a
// ddbschema.ExactWrite.Full write: each adds a ladder to
// its condition (up to 13 rungs), which DynamoDB caps at 4 KB and 300
// operators.
const maxFullLimits = 4
