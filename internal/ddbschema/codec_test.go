package ddbschema

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The items of fixed shape are encoded with attributevalue. The functions
// below build the same items attribute by attribute, as the package did
// before, and TestItemsMatchHandBuiltLayout checks that both agree
// attribute for attribute (names, types, NULLs, absent attributes, number
// text) on inputs with empty strings, nil and empty maps, zero times and
// extreme numbers.

func handEntityItem(ns string, e Entity) map[string]types.AttributeValue {
	name := e.Name
	if name == "" {
		name = e.ID
	}
	meta := make(map[string]types.AttributeValue, len(e.Metadata))
	for k, v := range e.Metadata {
		meta[k] = S(v)
	}
	item := map[string]types.AttributeValue{
		AttrPK: S(PKEntity(ns, e.ID)), AttrSK: S(SKMeta), AttrEntityID: S(e.ID), AttrName: S(name),
		AttrParentID: SOrNull(e.ParentID), AttrCascade: Bool(e.Cascade),
		AttrMetadata: &types.AttributeValueMemberM{Value: meta}, AttrCreatedAt: S(FormatISOSeconds(e.CreatedAt)),
		AttrGSI4PK: S(ns), AttrGSI4SK: S(PKEntity(ns, e.ID)),
	}
	if e.ParentID != "" {
		item[AttrGSI1PK] = S(GSI1PKParent(ns, e.ParentID))
		item[AttrGSI1SK] = S(GSI1SKChild(e.ID))
	}
	return item
}

func handAuditItem(ns string, e AuditEvent, ttl int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: S(PKAudit(ns, e.EntityID)), AttrSK: S(SKAudit(e.EventID)), AttrEntityID: S(e.EntityID),
		AttrEventID: S(e.EventID), AttrTimestamp: S(FormatISOSeconds(e.Timestamp)), AttrAction: S(e.Action),
		AttrPrincipal: SOrNull(e.Principal), AttrResource: SOrNull(e.Resource),
		AttrDetails: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
		AttrTTL:     N(ttl), AttrGSI4PK: S(ns), AttrGSI4SK: S(PKAudit(ns, e.EntityID)),
	}
}

func handVersionItem(v Version) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: S(PKSystem(ReservedNamespace)), AttrSK: S(SKVersion), AttrSchemaVersion: S(v.SchemaVersion),
		AttrClientMinVersion: S(v.ClientMinVersion), AttrUpdatedAt: S(FormatISOSeconds(v.UpdatedAt)),
		AttrLambdaVersion: SOrNull(v.LambdaVersion), AttrUpdatedBy: SOrNull(v.UpdatedBy),
		AttrGSI4PK: S(ReservedNamespace), AttrGSI4SK: S(PKSystem(ReservedNamespace)),
	}
}

func handNamespaceItem(sk string, r Namespace, reverse bool) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrPK: S(PKSystem(ReservedNamespace)), AttrSK: S(sk), AttrNamespaceID: S(r.ID),
		AttrNamespaceName: S(r.Name), AttrStatus: S(r.Status), AttrCreatedAt: S(FormatISOSeconds(r.CreatedAt)),
		AttrGSI4PK: S(ReservedNamespace), AttrGSI4SK: S(PKSystem(ReservedNamespace)),
	}
	if reverse && !r.DeletedAt.IsZero() {
		item[AttrDeletedAt] = S(FormatISOSeconds(r.DeletedAt))
	}
	return item
}

func handUsageItem(ns string, s UsageSnapshot, ttl int64) map[string]types.AttributeValue {
	key := FormatISOSeconds(s.WindowStart)
	item := map[string]types.AttributeValue{
		AttrPK: S(PKEntity(ns, s.EntityID)), AttrSK: S(SKUsage(s.Resource, key, s.WindowType)), AttrEntityID: S(s.EntityID),
		AttrResource: S(s.Resource), AttrWindow: S(s.WindowType), AttrWindowStart: S(key),
		AttrGSI2PK: S(GSI2PKResource(ns, s.Resource)), AttrGSI2SK: S(GSI2SKUsage(key, s.EntityID, s.WindowType)),
		AttrGSI4PK: S(ns), AttrGSI4SK: S(PKEntity(ns, s.EntityID)), AttrTTL: N(ttl), AttrTotalEvents: N(s.TotalEvents),
	}
	for name, n := range s.Counters {
		if _, taken := item[name]; !taken && !usageSnapshotExcluded[name] {
			item[name] = N(n)
		}
	}
	return item
}

func handConfigItems(ns, entityID, resource string, limits []ConfigLimit, onUnavailable string) [3]map[string]types.AttributeValue {
	items := [3]map[string]types.AttributeValue{
		{
			AttrPK: S(PKEntity(ns, entityID)), AttrSK: S(SKConfig(resource)), AttrEntityID: S(entityID),
			AttrResource: S(resource), AttrConfigVersion: N(ConfigVersion), AttrGSI3PK: S(GSI3PKEntityConfig(ns, resource)),
			AttrGSI3SK: S(GSI3SKEntity(entityID)), AttrGSI4PK: S(ns), AttrGSI4SK: S(PKEntity(ns, entityID)),
		},
		{
			AttrPK: S(PKResource(ns, resource)), AttrSK: S(SKConfigPrefix), AttrResource: S(resource),
			AttrConfigVersion: N(ConfigVersion), AttrGSI4PK: S(ns), AttrGSI4SK: S(PKResource(ns, resource)),
		},
		{
			AttrPK: S(PKSystem(ns)), AttrSK: S(SKConfigPrefix), AttrConfigVersion: N(ConfigVersion),
			AttrGSI4PK: S(ns), AttrGSI4SK: S(PKSystem(ns)),
		},
	}
	if onUnavailable != "" {
		items[2][AttrOnUnavailable] = S(onUnavailable)
	}
	for _, item := range items {
		putConfigLimits(item, limits)
	}
	return items
}

// layoutInputs draws the values the layouts are checked on.
type layoutInputs struct{ r *rand.Rand }

func (in layoutInputs) str() string {
	return []string{"", "a", "tenant-a", "openai/gpt-4", "ü #/x", " "}[in.r.IntN(6)]
}

func (in layoutInputs) time() time.Time {
	return []time.Time{
		{},
		time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("X", -3600)),
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Unix(in.r.Int64N(4e9), in.r.Int64N(1e9)),
	}[in.r.IntN(4)]
}

func (in layoutInputs) int() int64 {
	return []int64{0, 1, -1, math.MaxInt64, math.MinInt64, in.r.Int64()}[in.r.IntN(6)]
}

func (in layoutInputs) strings() map[string]string {
	switch in.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	return map[string]string{"tier": in.str(), "k": in.str()}
}

func (in layoutInputs) counters() map[string]int64 {
	if in.r.IntN(3) == 0 {
		return nil
	}
	return map[string]int64{"rpm": in.int(), "tpm-x": in.int(), "ttl": in.int(), "GSI4PK": in.int()}
}

func TestItemsMatchHandBuiltLayout(t *testing.T) {
	t.Parallel()
	in := layoutInputs{rand.New(rand.NewPCG(1, 2))}
	for i := range 500 {
		ns := in.str()
		check := func(what string, want, got map[string]types.AttributeValue) {
			t.Helper()
			require.NotNil(t, got, "%s #%d", what, i)
			assert.Equal(t, itemText(want), itemText(got), "%s #%d", what, i)
		}

		e := Entity{ID: in.str(), Name: in.str(), ParentID: in.str(), Cascade: in.r.IntN(2) == 0,
			Metadata: in.strings(), CreatedAt: in.time()}
		check(fmt.Sprintf("entity %+v", e), handEntityItem(ns, e), EntityItem(ns, e))

		a := AuditEvent{EventID: in.str(), Timestamp: in.time(), Action: in.str(), EntityID: in.str(),
			Principal: in.str(), Resource: in.str()}
		ttl := in.int()
		item, err := AuditItem(ns, a, ttl, nil)
		require.NoError(t, err)
		check(fmt.Sprintf("audit %+v", a), handAuditItem(ns, a, ttl), item)

		v := Version{SchemaVersion: in.str(), ClientMinVersion: in.str(), LambdaVersion: in.str(),
			UpdatedBy: in.str(), UpdatedAt: in.time(), TemplateVersion: in.str()}
		check(fmt.Sprintf("version %+v", v), handVersionItem(v), VersionItem(v))

		r := Namespace{Name: in.str(), ID: in.str(), Status: in.str(), CreatedAt: in.time(), DeletedAt: in.time()}
		check(fmt.Sprintf("forward %+v", r), handNamespaceItem(SKNamespace(r.Name), r, false), NamespaceForwardItem(r))
		check(fmt.Sprintf("reverse %+v", r), handNamespaceItem(SKNSID(r.ID), r, true), NamespaceReverseItem(r))

		s := UsageSnapshot{EntityID: in.str(), Resource: in.str(), WindowType: in.str(), WindowStart: in.time(),
			Counters: in.counters(), TotalEvents: in.int()}
		check(fmt.Sprintf("usage %+v", s), handUsageItem(ns, s, ttl), UsageSnapshotItem(ns, s, ttl))

		entityID, resource, onUnavailable := in.str(), in.str(), in.str()
		var limits []ConfigLimit
		for range in.r.IntN(3) {
			limits = append(limits, ConfigLimit{Name: in.str() + "l", Capacity: in.int(), RefillAmount: in.int(), RefillPeriodSeconds: in.int()})
		}
		want := handConfigItems(ns, entityID, resource, limits, onUnavailable)
		check("entity config", want[0], EntityConfigItem(ns, entityID, resource, limits))
		check("resource config", want[1], ResourceConfigItem(ns, resource, limits))
		check("system config", want[2], SystemConfigItem(ns, limits, onUnavailable))
	}
}

// wrongTypes are values of every attribute type.
var wrongTypes = []types.AttributeValue{
	S("x"), N(7), Bool(true), Null(),
	&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": S("b")}},
	&types.AttributeValueMemberL{Value: []types.AttributeValue{S("b")}},
	&types.AttributeValueMemberSS{Value: []string{"a"}},
	&types.AttributeValueMemberNS{Value: []string{"1"}},
	&types.AttributeValueMemberB{Value: []byte("b")},
	&types.AttributeValueMemberBS{Value: [][]byte{[]byte("b")}},
}

// checkLenient replaces each attribute named in attrs of item by a value of
// every other type and checks that read then returns what it returns with
// the attribute absent.
func checkLenient[T any](t *testing.T, item map[string]types.AttributeValue, attrs []string, read func(map[string]types.AttributeValue) T) {
	t.Helper()
	for _, name := range attrs {
		without := make(map[string]types.AttributeValue, len(item))
		for k, v := range item {
			if k != name {
				without[k] = v
			}
		}
		want := read(without)
		for _, av := range wrongTypes {
			if fmt.Sprintf("%T", av) == fmt.Sprintf("%T", item[name]) {
				continue // the right type
			}
			with := make(map[string]types.AttributeValue, len(item))
			for k, v := range without {
				with[k] = v
			}
			with[name] = av
			assert.Equal(t, want, read(with), "%s = %s", name, avText(av))
		}
	}
}

func TestReadersIgnoreWronglyTypedAttributes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	version := VersionItem(Version{SchemaVersion: "0.10.0", ClientMinVersion: "0.0.0", LambdaVersion: "0.10.3", UpdatedBy: "me", UpdatedAt: at})
	version[AttrTemplateVersion] = S("0.9.0")
	checkLenient(t, version, []string{AttrSchemaVersion, AttrClientMinVersion, AttrLambdaVersion, AttrUpdatedBy,
		AttrUpdatedAt, AttrTemplateVersion}, VersionFromItem)

	ns := NamespaceReverseItem(Namespace{Name: "a", ID: "id", Status: NamespaceDeleted, CreatedAt: at, DeletedAt: at})
	checkLenient(t, ns, []string{AttrNamespaceID, AttrNamespaceName, AttrStatus, AttrCreatedAt, AttrDeletedAt}, NamespaceFromItem)

	audit, err := AuditItem("ns", AuditEvent{EventID: "e", Timestamp: at, Action: "a", EntityID: "x", Principal: "p", Resource: "r"}, 1, nil)
	require.NoError(t, err)
	type auditRead struct {
		E   AuditEvent
		OK  bool
		Err error
	}
	readAudit := func(item map[string]types.AttributeValue) auditRead {
		e, ok, err := AuditEventFromItem(item)
		return auditRead{e, ok, err}
	}
	checkLenient(t, audit, []string{AttrEventID, AttrEntityID, AttrTimestamp, AttrPrincipal, AttrResource, AttrAction, AttrTTL}, readAudit)

	usage := UsageSnapshotItem("ns", UsageSnapshot{EntityID: "e", Resource: "r", WindowType: WindowDaily, WindowStart: at,
		Counters: map[string]int64{"rpm": 3}, TotalEvents: 2}, 1)
	type usageRead struct {
		S   UsageSnapshot
		OK  bool
		Err error
	}
	readUsage := func(item map[string]types.AttributeValue) usageRead {
		s, ok, err := UsageSnapshotFromItem(item)
		return usageRead{s, ok, err}
	}
	checkLenient(t, usage, []string{AttrEntityID, AttrResource, AttrWindow, AttrWindowStart, AttrTotalEvents, AttrTTL}, readUsage)

	entity := EntityItem("ns", Entity{ID: "e", Name: "n", ParentID: "p", Cascade: true, Metadata: map[string]string{"a": "b"}, CreatedAt: at})
	checkLenient(t, entity, []string{AttrEntityID, AttrName, AttrParentID, AttrCascade, AttrMetadata, AttrCreatedAt}, EntityFromItem)
}
