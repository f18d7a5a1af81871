package ddbschema

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// The speculative write of an acquire: one conditional UpdateItem that takes
// every named amount and one token of the hidden wcu limit, conditioned on
// the item existing and not being expired, on every limit being stored with
// the parameters the limiter resolved, on each positive amount fitting in
// its balance (the other named limits must exist) and on wcu holding a
// token. It carries a write identifier (see [WriteID]), so that a retry of
// it that already applied is refused and recognised.
//
// It takes from the stored balances without refilling, which is exact only
// while the limits taken from cannot have refilled to their capacity (see
// [BucketLimit]): each positive amount is also conditioned on the limit's
// fa lying after now (or on rf not lying before now, or before now less
// [QuietMs] for a limit of [LongRefillPeriodMs]: less than a millitoken
// has refilled since), on ts = tk
// and on fp holding the limit's parameters,
// and moves ts with tk and fa by ⌊amount × rp / ra⌋. A negative amount
// moves ts and removes fa. A refused write returns the item (ALL_OLD), from
// which the repository writes the refilled state exactly ([ExactUpdates]).
//
// It is sent on every acquire, so it is built from a template: the
// expressions and attribute names depend only on the limits (names and
// parameters) and on the names and signs of the amounts, which few
// distinct requests vary. A template holds the two expressions, the names
// and the values that never change (parameters, the wcu cost); a request
// adds its amounts, the current second and its key. Templates are shared
// read-only by concurrent requests, and so are the attribute value objects
// they hold: nothing the SDK does to a request writes to them.

// WCUWriteCostMilli is what one speculative write takes from the hidden
// wcu limit: one token.
const WCUWriteCostMilli = 1000

// SpecLimit is a limit a speculative write is conditioned on: its name and
// its parameters as stored (millitokens, milliseconds).
type SpecLimit struct {
	Name              string
	CapacityMilli     int64
	RefillAmountMilli int64
	RefillPeriodMs    int64
}

// SpecAmount is an amount a speculative write takes from a limit, in
// millitokens (zero: the limit must exist; negative: given back, not
// checked). A positive amount's limit must be among the write's limits,
// with parameters [ParamsSig] can hold (see [SpeculativeUpdates.Input]).
type SpecAmount struct {
	Name  string
	Milli int64
}

// maxSpecTemplates bounds the templates a [SpeculativeUpdates] (or an
// [ExactUpdates]) keeps. When full, the kept ones are dropped and the next
// shapes kept afresh: the names of in-flight generations (limits of their
// own) change every half slot TTL, so shapes keep coming and going, and a
// cache that kept its first shapes only would build every request of a
// long-running process from scratch.
const maxSpecTemplates = 256

// MaxTemplates is maxSpecTemplates, for the template caches of other
// packages that keep theirs with [KeepTemplate].
const MaxTemplates = maxSpecTemplates

// KeepTemplate returns a copy of kept, a cache of templates by shape,
// with t as shape's template; or a cache of t alone when kept holds
// maxSpecTemplates templates already (see there). The caller replaces
// its cache with it, never changing one in use.
func KeepTemplate[T any](kept map[string]*T, shape string, t *T) map[string]*T {
	var m map[string]*T
	if len(kept) >= maxSpecTemplates {
		m = make(map[string]*T, 1)
	} else {
		m = make(map[string]*T, len(kept)+1)
		for k, v := range kept {
			m[k] = v
		}
	}
	m[shape] = t
	return m
}

// SpeculativeUpdates builds the speculative UpdateItem of one table from
// cached templates. It is safe for concurrent use; the zero value is not
// usable, call [NewSpeculativeUpdates].
type SpeculativeUpdates struct {
	table *string
	// templates maps a shape (see shapeKey) to its template; replaced,
	// never changed, under mu.
	templates atomic.Pointer[map[string]*specTemplate]
	mu        sync.Mutex
}

// NewSpeculativeUpdates returns the builder of table's speculative writes.
func NewSpeculativeUpdates(table string) *SpeculativeUpdates {
	u := &SpeculativeUpdates{table: &table}
	m := map[string]*specTemplate{}
	u.templates.Store(&m)
	return u
}

// specTemplate is everything of a speculative write but its key, amounts
// and current second.
type specTemplate struct {
	cond, update *string
	names        map[string]string
	consts       []specConst  // parameters and the wcu cost
	amounts      []amountSlot // one per amount, in the shape's order
	now          string       // the placeholder of the current second
	nowMs        string       // of the current millisecond ("" when unused)
	nValues      int
	lastNow      atomic.Pointer[numberValue]
	lastNowMs    atomic.Pointer[numberValue]
}

type specConst struct {
	name  string
	value types.AttributeValue
}

// amountSlot is where an amount goes: take is the placeholder of the
// amount (the condition and the total consumed), give of its negation
// (the balance and its copy), delay of what it moves fa by; all empty for
// a zero amount, delay for a negative one. ra and rp are the limit's
// refill parameters.
type amountSlot struct {
	take, give, delay string
	ra, rp            int64
	last              atomic.Pointer[amountValues] // the values of the last amount seen
	// since is the placeholder of nowMs − quiet (quiet > 0): rf at or
	// after it means the limit refilled less than a millitoken since, so
	// its stored balance is its balance now. "" when quiet is 0: rf must
	// be now or later (the nowMs placeholder).
	since     string
	quiet     int64
	lastSince atomic.Pointer[numberValue]
}

// QuietMs is, for a limit of [LongRefillPeriodMs] (the buckets of
// calendar periods and prepaid balances, the generations of in-flight
// slots), the longest time after which it has still refilled less than
// one millitoken: ⌊(rp − 1) / ra⌋ ms, 36 days for one token a century.
// The speculative write takes from such a limit when it is full too, as
// long as rf is that recent. It is 0 for every other limit: rf must be
// now.
func QuietMs(refillAmountMilli, refillPeriodMs int64) int64 {
	if refillAmountMilli <= 0 || refillPeriodMs != LongRefillPeriodMs {
		return 0
	}
	return (refillPeriodMs - 1) / refillAmountMilli
}

type numberValue struct {
	n int64
	v types.AttributeValue
}

type amountValues struct {
	milli             int64
	take, give, delay types.AttributeValue
}

// Exact reports whether [SpeculativeUpdates.Input] can condition a write
// of amounts on limits on being exact: every positive amount's limit is
// among limits, with parameters [ParamsSig] can hold. When it cannot, the
// write must not be sent (it would take without knowing whether that is
// exact).
func Exact(limits []SpecLimit, amounts []SpecAmount) bool {
	for _, a := range amounts {
		if a.Milli <= 0 {
			continue
		}
		ok := false
		for _, l := range limits {
			if l.Name == a.Name {
				ok = Signed(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs)
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Input returns the speculative UpdateItem of the item key, conditioned on
// limits and taking amounts (sorted by name, no name twice), at nowMs
// (epoch ms; the TTL condition takes its second), carrying the write
// identifier id (non-zero). [Exact] must hold for limits and amounts. The
// caller owns the slices; key goes into the input as is.
func (u *SpeculativeUpdates) Input(key map[string]types.AttributeValue, limits []SpecLimit, amounts []SpecAmount, nowMs int64, id WriteID) *dynamodb.UpdateItemInput {
	nowSec := floorDiv(nowMs, 1000)
	var buf [256]byte
	shape := shapeKey(buf[:0], limits, amounts)
	t := (*u.templates.Load())[string(shape)]
	if t == nil {
		t = u.template(string(shape), limits, amounts)
	}
	values := make(map[string]types.AttributeValue, t.nValues+1)
	for _, c := range t.consts {
		values[c.name] = c.value
	}
	values[writeIDValue] = id.Value()
	for i := range t.amounts {
		slot := &t.amounts[i]
		if slot.take == "" {
			continue
		}
		av := slot.last.Load()
		if av == nil || av.milli != amounts[i].Milli {
			m := amounts[i].Milli
			av = &amountValues{milli: m, take: N(m), give: N(-m)}
			if slot.delay != "" {
				av.delay = N(bucketmath.TakeDelayMs(m, slot.ra, slot.rp))
			}
			slot.last.Store(av)
		}
		values[slot.take], values[slot.give] = av.take, av.give
		if slot.delay != "" {
			values[slot.delay] = av.delay
		}
		if slot.since != "" {
			values[slot.since] = cachedNumber(&slot.lastSince, nowMs-slot.quiet)
		}
	}
	values[t.now] = cachedNumber(&t.lastNow, nowSec)
	if t.nowMs != "" {
		values[t.nowMs] = cachedNumber(&t.lastNowMs, nowMs)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           u.table,
		Key:                                 key,
		UpdateExpression:                    t.update,
		ConditionExpression:                 t.cond,
		ExpressionAttributeNames:            t.names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// Update returns the speculative write of [SpeculativeUpdates.Input] as
// the Update of a transaction (which returns no item, but the old item
// when its condition fails).
func (u *SpeculativeUpdates) Update(key map[string]types.AttributeValue, limits []SpecLimit, amounts []SpecAmount, nowMs int64, id WriteID) *types.Update {
	return TransactUpdate(u.Input(key, limits, amounts, nowMs, id))
}

// cachedNumber returns the attribute value of n, from last when it holds
// it, else a new one it keeps there.
func cachedNumber(last *atomic.Pointer[numberValue], n int64) types.AttributeValue {
	nv := last.Load()
	if nv == nil || nv.n != n {
		nv = &numberValue{n: n, v: N(n)}
		last.Store(nv)
	}
	return nv.v
}

// shapeKey appends to dst what a template depends on: the limits with
// their parameters, and the names and signs of the amounts.
func shapeKey(dst []byte, limits []SpecLimit, amounts []SpecAmount) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(limits)))
	for _, l := range limits {
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		dst = binary.AppendVarint(dst, l.CapacityMilli)
		dst = binary.AppendVarint(dst, l.RefillAmountMilli)
		dst = binary.AppendVarint(dst, l.RefillPeriodMs)
	}
	for _, a := range amounts {
		dst = binary.AppendUvarint(dst, uint64(len(a.Name)))
		dst = append(dst, a.Name...)
		switch {
		case a.Milli > 0:
			dst = append(dst, '+')
		case a.Milli < 0:
			dst = append(dst, '-')
		default:
			dst = append(dst, '0')
		}
	}
	return dst
}

// template builds the template of a shape and keeps it (see
// maxSpecTemplates).
func (u *SpeculativeUpdates) template(shape string, limits []SpecLimit, amounts []SpecAmount) *specTemplate {
	t := buildSpecTemplate(limits, amounts)
	u.mu.Lock()
	defer u.mu.Unlock()
	old := *u.templates.Load()
	if kept, ok := old[shape]; ok {
		return kept
	}
	m := KeepTemplate(old, shape, t)
	u.templates.Store(&m)
	return t
}

// buildSpecTemplate writes the expressions of a shape.
func buildSpecTemplate(limits []SpecLimit, amounts []SpecAmount) *specTemplate {
	t := &specTemplate{names: map[string]string{}, amounts: make([]amountSlot, len(amounts))}
	for i, p := range writeIDNames {
		t.names[p] = writeIDAttrs[i]
	}
	byName := map[string]string{}
	name := func(attr string) string {
		if p, ok := byName[attr]; ok {
			return p
		}
		p := "#a" + strconv.Itoa(len(byName))
		byName[attr], t.names[p] = p, attr
		return p
	}
	value := func() string {
		p := ":v" + strconv.Itoa(t.nValues)
		t.nValues++
		return p
	}
	constant := func(n int64) string {
		p := value()
		t.consts = append(t.consts, specConst{p, N(n)})
		return p
	}
	conds := []string{"attribute_exists(" + name(AttrPK) + ")"}
	for _, l := range limits {
		conds = append(conds,
			name(BucketAttr(l.Name, FieldCapacity))+" = "+constant(l.CapacityMilli),
			name(BucketAttr(l.Name, FieldRefillAmount))+" = "+constant(l.RefillAmountMilli),
			name(BucketAttr(l.Name, FieldRefillPeriod))+" = "+constant(l.RefillPeriodMs))
	}
	params := func(n string) (SpecLimit, string) {
		for _, l := range limits {
			if l.Name == n {
				sig, _ := ParamsSig(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs)
				return l, sig
			}
		}
		return SpecLimit{}, ""
	}
	var add, remove []string
	for i, a := range amounts {
		tk := name(BucketAttr(a.Name, FieldTokens))
		if a.Milli == 0 {
			conds = append(conds, "attribute_exists("+tk+")")
			continue
		}
		slot := &t.amounts[i]
		slot.take, slot.give = value(), value()
		ts, fa := name(BucketAttr(a.Name, FieldShadow)), name(BucketAttr(a.Name, FieldFullAt))
		if a.Milli > 0 {
			// Exact only while the limit cannot be full by now (Exact:
			// its parameters are known and have a signature).
			l, sig := params(a.Name)
			if t.nowMs == "" {
				t.nowMs = value()
			}
			slot.delay, slot.ra, slot.rp = value(), l.RefillAmountMilli, l.RefillPeriodMs
			fp := value()
			t.consts = append(t.consts, specConst{fp, &types.AttributeValueMemberN{Value: sig}})
			// Or rf is recent enough (now or later; within QuietMs for a
			// limit of LongRefillPeriodMs):
			// less than a millitoken has refilled since, so the stored
			// balance is the balance now, full or not.
			since := t.nowMs
			if slot.quiet = QuietMs(l.RefillAmountMilli, l.RefillPeriodMs); slot.quiet > 0 {
				slot.since = value()
				since = slot.since
			}
			conds = append(conds, tk+" >= "+slot.take, "("+fa+" > "+t.nowMs+" OR "+name(AttrRefill)+" >= "+since+")", tk+" = "+ts, name(BucketAttr(a.Name, FieldParams))+" = "+fp)
			add = append(add, fa+" "+slot.delay)
		} else {
			conds = append(conds, "attribute_exists("+tk+")")
			remove = append(remove, fa)
		}
		add = append(add, tk+" "+slot.give, ts+" "+slot.give, name(BucketAttr(a.Name, FieldTotalConsumed))+" "+slot.take)
	}
	wtk := name(BucketAttr(WCULimitName, FieldTokens))
	cost := constant(WCUWriteCostMilli)
	conds = append(conds, wtk+" >= "+cost)
	add = append(add, wtk+" "+constant(-WCUWriteCostMilli), name(BucketAttr(WCULimitName, FieldTotalConsumed))+" "+cost)
	ttl := name(AttrTTL)
	t.now = value()
	conds = append(conds, "(attribute_not_exists("+ttl+") OR "+ttl+" > "+t.now+")", writeIDCond)
	cond, update := strings.Join(conds, " AND "), UpdateExpr([]string{writeIDSet}, add, remove)
	t.cond, t.update = &cond, &update
	return t
}

// skStateValue is the sort key of every bucket item, shared by their keys.
var skStateValue = S(SKState)

// BucketKeyValue returns the key of a bucket item (as [BucketPrimaryKey]),
// sharing its sort key value with every other bucket key: a request must
// not write to it.
func BucketKeyValue(ns, entityID, resource string, shard int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: S(PKBucket(ns, entityID, resource, shard)), AttrSK: skStateValue}
}
