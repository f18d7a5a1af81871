package ddbschema

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// UsageSnapshot is a usage snapshot item: PK {ns}/ENTITY#{id}, SK
// #USAGE#{res}#{window key}#{window type}, one item per window type (see
// [SKUsage]). The aggregator writes them with [UsageSnapshotUpdate];
// [UsageSnapshotItem] gives the item such an update creates. Items of the
// shared layout, SK #USAGE#{res}#{window key} ([SKUsageShared]), are read
// the same way: their window attribute names the window type that created
// them, and an item starting at 00:00 UTC may hold the sum of the windows
// that start then.
type UsageSnapshot struct {
	EntityID    string
	Resource    string
	WindowType  string // WindowHourly, WindowDaily or WindowMonthly
	WindowStart time.Time
	WindowEnd   time.Time // derived on read (see [WindowEnd]), never written
	// Counters maps limit names to consumed tokens in the window.
	Counters map[string]int64
	// TotalEvents counts the limit deltas recorded in the window.
	TotalEvents int64
}

// ErrInvalidSnapshot is matched (errors.Is) by the error of a usage
// snapshot update without entity or resource, or with nothing to add.
var ErrInvalidSnapshot = errors.New("invalid usage snapshot")

// usageSnapshotExcluded lists the attributes of a snapshot item that are not
// counters even when they are numbers.
var usageSnapshotExcluded = map[string]bool{
	AttrPK: true, AttrSK: true, AttrEntityID: true, AttrResource: true,
	AttrWindow: true, AttrWindowStart: true, AttrTotalEvents: true,
	AttrGSI2PK: true, AttrGSI2SK: true, AttrTTL: true,
}

// usageAttrs are the attributes of a usage snapshot item that are read,
// but for its numbers.
type usageAttrs struct {
	EntityID    sAttr `dynamodbav:"entity_id"`
	Resource    sAttr `dynamodbav:"resource"`
	Window      sAttr `dynamodbav:"window"`
	WindowStart sAttr `dynamodbav:"window_start"`
}

// usageRecord is the layout of a usage snapshot item without its counters.
type usageRecord struct {
	tableKey
	usageAttrs
	GSI2PK      string `dynamodbav:"GSI2PK"`
	GSI2SK      string `dynamodbav:"GSI2SK"`
	TTL         int64  `dynamodbav:"ttl"`
	TotalEvents int64  `dynamodbav:"total_events"`
	gsi4Key
}

// UsageSnapshotItem returns the snapshot item for s with the given ttl
// (epoch seconds), keyed by its window start and type. The window key is
// FormatISOSeconds(s.WindowStart).
// Counters named like a layout attribute (ttl, window, …) are skipped, as
// they would collide.
func UsageSnapshotItem(ns string, s UsageSnapshot, ttl int64) map[string]types.AttributeValue {
	key := FormatISOSeconds(s.WindowStart)
	item := marshalItem(&usageRecord{
		tableKey: tableKey{PK: PKEntity(ns, s.EntityID), SK: SKUsage(s.Resource, key, s.WindowType)},
		usageAttrs: usageAttrs{
			EntityID:    sAttr(s.EntityID),
			Resource:    sAttr(s.Resource),
			Window:      sAttr(s.WindowType),
			WindowStart: sAttr(key),
		},
		GSI2PK:      GSI2PKResource(ns, s.Resource),
		GSI2SK:      GSI2SKUsage(key, s.EntityID, s.WindowType),
		TTL:         ttl,
		TotalEvents: s.TotalEvents,
		gsi4Key:     gsi4Key{GSI4PK: ns, GSI4SK: PKEntity(ns, s.EntityID)},
	})
	// The counters are attributes named after the limits, so they are
	// added by hand.
	for name, n := range s.Counters {
		if _, taken := item[name]; !taken && !usageSnapshotExcluded[name] {
			item[name] = N(n)
		}
	}
	return item
}

// UsageSnapshotFromItem reads a snapshot item. ok is false for items without
// entity_id, resource or window_start and for items whose window_start is
// not a timestamp. WindowEnd follows [WindowEnd]; Counters holds every
// number attribute except the layout's own (PK, SK, entity_id, resource,
// window, window_start, total_events, GSI2PK, GSI2SK, ttl). A counter that
// is not an integer is an error.
func UsageSnapshotFromItem(item map[string]types.AttributeValue) (s UsageSnapshot, ok bool, err error) {
	var a usageAttrs
	unmarshalItem(item, &a)
	s.EntityID, s.Resource, s.WindowType = string(a.EntityID), string(a.Resource), string(a.Window)
	start := string(a.WindowStart)
	if s.EntityID == "" || s.Resource == "" || start == "" {
		return UsageSnapshot{}, false, nil
	}
	if s.WindowStart, err = ParseISOSeconds(start); err != nil {
		return UsageSnapshot{}, false, nil
	}
	s.WindowEnd = WindowEnd(s.WindowType, s.WindowStart)
	// The numbers are read by hand: the counters are attributes named after
	// the limits, and total_events is read with them so that a malformed
	// number is reported with its attribute's name.
	if s.TotalEvents, err = GetNOr(item, AttrTotalEvents, 0); err != nil {
		return UsageSnapshot{}, false, fmt.Errorf("usage snapshot %s/%s %s: %w", s.EntityID, s.Resource, start, err)
	}
	s.Counters = map[string]int64{}
	for name := range item {
		if usageSnapshotExcluded[name] {
			continue
		}
		n, isN, err := GetN(item, name)
		if err != nil {
			return UsageSnapshot{}, false, fmt.Errorf("usage snapshot %s/%s %s: %w", s.EntityID, s.Resource, start, err)
		}
		if isN {
			s.Counters[name] = n
		}
	}
	return s, true, nil
}

// usageCounterCollides reports whether a limit name cannot be a snapshot
// counter because the snapshot layout uses that attribute.
func usageCounterCollides(name string) bool {
	return usageSnapshotExcluded[name] || name == AttrGSI4PK || name == AttrGSI4SK
}

// UsageSnapshotUpdate returns the UpdateItem that adds delta to the usage
// snapshot of delta's entity, resource and window, creating it when
// missing: delta.WindowType selects the window type and delta.WindowStart
// may be any instant inside the window; the item is the window type's own
// (its keys name the type, so the hour from midnight and the day are two
// items); delta.Counters (tokens per limit) and
// delta.TotalEvents are added with ADD; the item's keys and attributes are
// set, the ttl only on creation (from expires, epoch seconds). WindowEnd is
// ignored. The hidden wcu limit and limits named like a layout attribute
// (ttl, window, resource, …, which would collide) are left out. An unknown
// window is an error; an empty entity or resource, or nothing to add, is an
// error matching [ErrInvalidSnapshot].
func UsageSnapshotUpdate(table, ns string, delta UsageSnapshot, expires time.Time) (*dynamodb.UpdateItemInput, error) {
	key, err := WindowKey(delta.WindowType, delta.WindowStart)
	if err != nil {
		return nil, err
	}
	if delta.EntityID == "" || delta.Resource == "" {
		return nil, fmt.Errorf("%w %s/%s: entity and resource are required", ErrInvalidSnapshot, delta.EntityID, delta.Resource)
	}
	names := make([]string, 0, len(delta.Counters))
	for _, name := range slices.Sorted(maps.Keys(delta.Counters)) {
		if name != WCULimitName && !usageCounterCollides(name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 && delta.TotalEvents == 0 {
		return nil, fmt.Errorf("%w %s/%s: nothing to add", ErrInvalidSnapshot, delta.EntityID, delta.Resource)
	}
	entity, res := delta.EntityID, delta.Resource
	b := NewExpr()
	keep := func(attr string, v types.AttributeValue) string {
		a := b.Name(attr)
		return a + " = if_not_exists(" + a + ", " + b.Value(v) + ")"
	}
	set := []string{
		b.Name(AttrEntityID) + " = " + b.Value(S(entity)),
		keep(AttrResource, S(res)),
		keep(AttrWindow, S(delta.WindowType)),
		keep(AttrWindowStart, S(key)),
		b.Name(AttrGSI2PK) + " = " + b.Value(S(GSI2PKResource(ns, res))),
		b.Name(AttrGSI2SK) + " = " + b.Value(S(GSI2SKUsage(key, entity, delta.WindowType))),
		keep(AttrGSI4PK, S(ns)),
		keep(AttrGSI4SK, S(PKEntity(ns, entity))),
		keep(AttrTTL, N(expires.Unix())),
	}
	add := make([]string, 0, len(names)+1)
	for _, name := range names {
		add = append(add, b.Name(name)+" "+b.N(delta.Counters[name]))
	}
	add = append(add, b.Name(AttrTotalEvents)+" "+b.N(delta.TotalEvents))
	u := b.Update(table, PrimaryKey(PKEntity(ns, entity), SKUsage(res, key, delta.WindowType)), UpdateExpr(set, add, nil), nil)
	return UpdateInput(u), nil
}
