package ddbschema

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// The exact write of a bucket item: the state a read, refill and write would
// leave, computed by the caller from the item as it last saw it, and
// conditioned on the item still being that: the same rf, and per limit
// written the same balance and parameters. It sets every balance it writes
// (tk and its copy ts) and the exact state of the speculative write (fa
// and fp, see [BucketLimit]), so that it also repairs a stale or missing
// one. The speculative write hands over to it when taking from the stored
// balance may not be exact (a limit may be full by now), and the retry of
// a read-then-write uses it. With a write identifier ([ExactWrite].ID) a
// retry of it that applied is recognised: its condition on the item being
// unchanged refuses it, and the item it returns holds the identifier.
//
// When every limit of the item (the hidden wcu limit too) is full by now,
// the state the write leaves does not depend on the balances or rf read:
// each limit is its capacity less what the write takes. Such a write
// ([ExactWrite].Full) is conditioned on every limit being full by now
// instead of on the item being unchanged: per limit, on one of the rungs
// of a ladder (the rung of the item as read: rf at most the one read, tk
// at least the capacity less what the time since refills; and rf at least
// k ms before now and tk at least the capacity less what k ms refill, for
// k = 1, 2, 4, … below the time since the read's rf, where the writes of
// others since put it) holding; all the ladders are said in one
// disjunction over the rungs (see fullLadders). Writers that
// move the item meanwhile (a take, a refill, a write of the Python
// library, which moves tk and rf alike) leave it full as long as the
// refill since covers what they took, and the write still applies; when
// it does not, the write is refused and returns the item, as the
// unchanged-item condition would.
//
// Like the speculative write it is built from cached templates: the
// expressions depend on the names and parameters of the limits written and
// on which values are present, not on the values.

// ExactLimit is one limit an exact write sets.
type ExactLimit struct {
	Name string
	// Create: the item lacks the limit (the write is conditioned on its
	// absence) and creates it with NewMilli, its parameters unless stored
	// already (if_not_exists), and no fa.
	Create bool
	// OldMilli is the balance the write is conditioned on (not Create).
	OldMilli int64
	// NewMilli is the balance written, to tk and ts.
	NewMilli int64
	// TakenMilli is added to tc (0: tc is left alone).
	TakenMilli int64
	// The parameters: conditioned on (written for Create). fa and fp are
	// written when [ParamsSig] holds them, else fa is removed.
	CapacityMilli, RefillAmountMilli, RefillPeriodMs int64
	// FullAtMs is the fa written.
	FullAtMs int64
}

// ExactWCU is what an exact write does to the hidden wcu limit: ADD
// DeltaMilli to its balance and TakenMilli to its tc, on condition that
// its balance is at least NeedMilli (when HasNeed). A [ExactWrite.Full]
// write sets its balance to NewMilli instead, on the ladder of its
// parameters.
type ExactWCU struct {
	DeltaMilli, TakenMilli, NeedMilli int64
	HasNeed                           bool
	NewMilli                          int64
	// The parameters, for the ladder of a Full write.
	CapacityMilli, RefillAmountMilli, RefillPeriodMs int64
}

// maxRungMs bounds the k of a ladder: a state that only a later rung
// would show full is refused, and written from the item it returns. It
// keeps a full write within what DynamoDB accepts in one condition (at
// most 300 operators): 13 rungs, each of up to 11 operators for five
// limits (the item's four and wcu: a comparison of rf, one of each
// balance, and their ANDs; the read rung 21), leave room for the write's
// other conditions.
const maxRungMs = 1 << 11

// rungCount returns how many rungs besides the item's as read the ladders
// of a write at now of an item read with rf oldRefillMs have at most: one
// per power of two k below the time since (writers since then moved rf
// after the read's), at most up to maxRungMs. A write made right after
// the item's last (a bucket taken from faster than it fills) has few.
func rungCount(oldRefillMs, nowMs int64) int {
	elapsed := bucketmath.AddSat(nowMs, -oldRefillMs)
	n := 0
	for k := int64(1); k < elapsed && k <= maxRungMs; k *= 2 {
		n++
	}
	return n
}

// fullRungs calls f with each rung of the ladder of a limit at now besides
// the item's as read: rf at most rfMax, and tk at least tkMin, or exactly
// tkMin when exact (a rung whose k ms refill nothing: a balance above the
// capacity, left by a lowered one, is capped only by a refill). Its k are
// 1, 2, 4, …, n of them (rungCount), and none past the first at which the
// limit fills from empty. The rungs depend on n and the parameters only,
// so a template's shape holds them.
func fullRungs(nowMs int64, n int, capacityMilli, refillAmountMilli, refillPeriodMs int64, f func(rfMax, tkMin int64, exact bool)) {
	fill := int64(math.MaxInt64)
	if refillAmountMilli > 0 && refillPeriodMs > 0 && capacityMilli > 0 {
		fill = bucketmath.GiveDelayMs(capacityMilli, refillAmountMilli, refillPeriodMs)
	}
	k := int64(1)
	for range n {
		add, _ := bucketmath.Refill(0, 0, k, math.MaxInt64, refillAmountMilli, refillPeriodMs)
		if add <= 0 {
			f(bucketmath.AddSat(nowMs, -k), capacityMilli, true)
		} else {
			f(bucketmath.AddSat(nowMs, -k), bucketmath.AddSat(capacityMilli, -add), false)
		}
		if k >= fill {
			return
		}
		k *= 2
	}
}

// ExactWrite is one exact write of a bucket item.
type ExactWrite struct {
	// OldRefillMs is the rf the write is conditioned on; NewRefillMs the
	// one it sets (nothing when equal).
	OldRefillMs, NewRefillMs int64
	// Limits are the limits written, sorted by name.
	Limits []ExactLimit
	// Params are further limits, not written, whose stored parameters the
	// write is conditioned on (as the speculative write is), sorted by
	// name.
	Params []SpecLimit
	// WCU, when HasWCU, is written to the wcu limit.
	WCU    ExactWCU
	HasWCU bool
	// NowMs, when TTLCheck, conditions the write on the item not having
	// expired (its ttl after NowMs's second).
	NowMs    int64
	TTLCheck bool
	// ID, when not zero, is the write's identifier (see [WriteID]).
	ID WriteID
	// CheckIncarnation conditions the write on the item's incarnation
	// ([AttrIncarnation]) being Incarnation (zero: on its having none).
	CheckIncarnation bool
	Incarnation      int64
	// Full: every limit of the item is full by NowMs and the write refills
	// (NewRefillMs is NowMs): it is conditioned on the ladder of each
	// limit written and of wcu (HasWCU) instead of on rf and the balances
	// read, and sets wcu's balance. Every limit of the item must be
	// written, none created.
	Full bool
}

// ExactUpdates builds the exact writes of one table from cached templates.
// It is safe for concurrent use; call [NewExactUpdates].
type ExactUpdates struct {
	table     *string
	templates atomic.Pointer[map[string]*exactTemplate]
	mu        sync.Mutex
}

// NewExactUpdates returns the builder of table's exact writes.
func NewExactUpdates(table string) *ExactUpdates {
	u := &ExactUpdates{table: &table}
	m := map[string]*exactTemplate{}
	u.templates.Store(&m)
	return u
}

// exactTemplate is an exact write without its values that vary: the
// placeholders of each in the order numbers lists them.
type exactTemplate struct {
	cond, update *string
	names        map[string]string
	consts       []specConst
	// slots are the placeholders of the varying numbers, in the order
	// exactNumbers appends them.
	slots   []string
	nValues int
}

// Input returns the exact write w of the item key. The caller owns w; key
// goes into the input as is.
func (u *ExactUpdates) Input(key map[string]types.AttributeValue, w *ExactWrite) *dynamodb.UpdateItemInput {
	var buf [512]byte
	shape := exactShape(buf[:0], w)
	t := (*u.templates.Load())[string(shape)]
	if t == nil {
		t = u.template(string(shape), w)
	}
	var nbuf [24]int64
	nums := exactNumbers(nbuf[:0], w)
	values := make(map[string]types.AttributeValue, t.nValues+1)
	for _, c := range t.consts {
		values[c.name] = c.value
	}
	if w.ID != 0 {
		values[writeIDValue] = w.ID.Value()
	}
	// The varying numbers in two allocations: their digits in one string,
	// their attribute values in one array.
	var digits [24 * 20]byte
	text := digits[:0]
	var endsBuf [24]int
	ends := endsBuf[:0]
	for _, n := range nums {
		text = strconv.AppendInt(text, n, 10)
		ends = append(ends, len(text))
	}
	all := string(text)
	avs := make([]types.AttributeValueMemberN, len(nums))
	start := 0
	for i := range nums {
		avs[i].Value = all[start:ends[i]]
		start = ends[i]
		values[t.slots[i]] = &avs[i]
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

// Update returns w as the Update of a transaction (which returns no
// item, but the old item when its condition fails).
func (u *ExactUpdates) Update(key map[string]types.AttributeValue, w *ExactWrite) *types.Update {
	return TransactUpdate(u.Input(key, w))
}

// refills reports whether w moves rf.
func (w *ExactWrite) refills() bool { return w.NewRefillMs != w.OldRefillMs }

// exactShape appends to dst what the template of w depends on.
func exactShape(dst []byte, w *ExactWrite) []byte {
	flags := byte(0)
	if w.refills() {
		flags |= 1
	}
	if w.TTLCheck {
		flags |= 2
	}
	if w.HasWCU {
		flags |= 4
		if w.WCU.HasNeed {
			flags |= 8
		}
		if w.WCU.TakenMilli != 0 {
			flags |= 16
		}
	}
	if w.ID != 0 {
		flags |= 32
	}
	if w.CheckIncarnation {
		flags |= 64
		if w.Incarnation != 0 {
			flags |= 128
		}
	}
	dst = append(dst, flags)
	if w.Full {
		dst = append(dst, 1, byte(rungCount(w.OldRefillMs, w.NowMs)))
		dst = binary.AppendVarint(dst, w.WCU.CapacityMilli)
		dst = binary.AppendVarint(dst, w.WCU.RefillAmountMilli)
		dst = binary.AppendVarint(dst, w.WCU.RefillPeriodMs)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(w.Limits)))
	for i := range w.Limits {
		l := &w.Limits[i]
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		lf := byte(0)
		if l.Create {
			lf |= 1
		}
		if l.TakenMilli != 0 {
			lf |= 2
		}
		dst = append(dst, lf)
		dst = binary.AppendVarint(dst, l.CapacityMilli)
		dst = binary.AppendVarint(dst, l.RefillAmountMilli)
		dst = binary.AppendVarint(dst, l.RefillPeriodMs)
	}
	dst = binary.AppendUvarint(dst, uint64(len(w.Params)))
	for _, p := range w.Params {
		dst = binary.AppendUvarint(dst, uint64(len(p.Name)))
		dst = append(dst, p.Name...)
		dst = binary.AppendVarint(dst, p.CapacityMilli)
		dst = binary.AppendVarint(dst, p.RefillAmountMilli)
		dst = binary.AppendVarint(dst, p.RefillPeriodMs)
	}
	return dst
}

// exactNumbers appends to dst the varying numbers of w, in the order of the
// template's slots: rf as read, the incarnation checked, rf written, the
// second of the TTL check, per limit its old balance, new balance, fa and
// amount taken, then the wcu delta, need and amount taken (each only when
// the template has it).
func exactNumbers(dst []int64, w *ExactWrite) []int64 {
	if !w.Full {
		dst = append(dst, w.OldRefillMs)
	}
	if w.CheckIncarnation && w.Incarnation != 0 {
		dst = append(dst, w.Incarnation)
	}
	if w.refills() {
		dst = append(dst, w.NewRefillMs)
	}
	if w.TTLCheck {
		dst = append(dst, floorDiv(w.NowMs, 1000))
	}
	if w.Full {
		dst = appendFullLadders(dst, w)
	}
	for i := range w.Limits {
		l := &w.Limits[i]
		if !w.Full && !l.Create {
			dst = append(dst, l.OldMilli)
		}
		dst = append(dst, l.NewMilli)
		if !l.Create && Signed(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs) {
			dst = append(dst, l.FullAtMs)
		}
		if l.TakenMilli != 0 {
			dst = append(dst, l.TakenMilli)
		}
	}
	if c := &w.WCU; w.HasWCU && w.Full {
		dst = append(dst, c.NewMilli)
		if c.TakenMilli != 0 {
			dst = append(dst, c.TakenMilli)
		}
	} else if w.HasWCU {
		dst = append(dst, c.DeltaMilli)
		if c.HasNeed {
			dst = append(dst, c.NeedMilli)
		}
		if c.TakenMilli != 0 {
			dst = append(dst, c.TakenMilli)
		}
	}
	return dst
}

// readRung returns the least balance at which a limit whose rf is
// oldRefillMs is full by now (math.MaxInt64, which no balance reaches,
// when the time between refills nothing): the rung of the item as read,
// which it satisfies when it was full and is unchanged.
func readRung(oldRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) int64 {
	add, _ := bucketmath.Refill(0, oldRefillMs, nowMs, math.MaxInt64, refillAmountMilli, refillPeriodMs)
	if add <= 0 {
		return math.MaxInt64
	}
	return bucketmath.AddSat(capacityMilli, -add)
}

// FullLadder calls f with each rung of the ladder of a limit written at
// now, on an item read with rf oldRefillMs, that a [ExactWrite.Full] write
// conditions on (the item's as read first): a balance tk and the item's rf
// are within one when rf ≤ rfMax and tk ≥ tkMin (tk = tkMin when exact),
// and then the limit is full by now. For writes built without a template.
func FullLadder(oldRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64, f func(rfMax, tkMin int64, exact bool)) {
	f(oldRefillMs, readRung(oldRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs), false)
	fullRungs(nowMs, rungCount(oldRefillMs, nowMs), capacityMilli, refillAmountMilli, refillPeriodMs, f)
}

// appendFullLadders appends the numbers of the condition of a Full write
// (see fullLadders), in the order of the template's slots: rf of each rung
// (the read rung's, then those of fullRungs), then per ladder (the limits
// written, then wcu) the read rung's bound and those of its rungs.
func appendFullLadders(dst []int64, w *ExactWrite) []int64 {
	n := rungCount(w.OldRefillMs, w.NowMs)
	dst = append(dst, w.OldRefillMs)
	k := int64(1)
	for range n {
		dst = append(dst, bucketmath.AddSat(w.NowMs, -k))
		k *= 2
	}
	each := func(cp, ra, rp int64) {
		dst = append(dst, readRung(w.OldRefillMs, w.NowMs, cp, ra, rp))
		fullRungs(w.NowMs, n, cp, ra, rp, func(_, tkMin int64, _ bool) {
			dst = append(dst, tkMin)
		})
	}
	for i := range w.Limits {
		if l := &w.Limits[i]; !l.Create {
			each(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs)
		}
	}
	if c := &w.WCU; w.HasWCU {
		each(c.CapacityMilli, c.RefillAmountMilli, c.RefillPeriodMs)
	}
	return dst
}

// template builds the template of a shape and keeps it (see
// maxSpecTemplates).
func (u *ExactUpdates) template(shape string, w *ExactWrite) *exactTemplate {
	t := buildExactTemplate(w)
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

// fullLadders returns the condition of a Full write that every limit,
// whose balances are the attributes tks and parameters params, is full by
// now: that each holds on one rung of its ladder (the read rung and the n
// of fullRungs), said in one disjunction over the rungs rather than one
// per limit. All ladders share rf and the k of their rungs, and a rung's
// test of a balance only weakens as k grows (the refill of k ms grows with
// k; a test of equality, where k ms refill nothing, is passed only by the
// capacity, which every later test passes too); the read rung has the
// oldest rf. So the ladders all hold iff, at the oldest rung whose rf
// bound rf is within, each balance passes its ladder's test of that rung,
// of its last rung when its ladder ended before (it fills from empty by
// then), and at the read rung its read test or its last rung's. Per rung
// that is one comparison of rf and one of each balance: about half the
// operators of a ladder per limit, which DynamoDB caps at 300 for a
// condition. slot allocates the placeholder of the next number, in
// appendFullLadders' order.
func fullLadders(rf string, tks []string, params [][3]int64, n int, nowMs int64, slot func() string) string {
	rfs := make([]string, n+1)
	for i := range rfs {
		rfs[i] = slot()
	}
	reads := make([]string, len(tks))
	tests := make([][]string, len(tks))
	for i, tk := range tks {
		reads[i] = tk + " >= " + slot()
		p := params[i]
		fullRungs(nowMs, n, p[0], p[1], p[2], func(_, _ int64, exact bool) {
			op := " >= "
			if exact {
				op = " = "
			}
			tests[i] = append(tests[i], tk+op+slot())
		})
	}
	rungs := make([]string, 0, n+1)
	for j := 1; j <= n; j++ {
		parts := []string{rf + " <= " + rfs[j]}
		for _, t := range tests {
			parts = append(parts, t[min(j, len(t))-1])
		}
		rungs = append(rungs, "("+strings.Join(parts, " AND ")+")")
	}
	parts := []string{rf + " <= " + rfs[0]}
	for i, t := range tests {
		if len(t) == 0 {
			parts = append(parts, reads[i])
		} else {
			parts = append(parts, "("+reads[i]+" OR "+t[len(t)-1]+")")
		}
	}
	rungs = append(rungs, "("+strings.Join(parts, " AND ")+")")
	if len(rungs) == 1 {
		return rungs[0] // DynamoDB refuses redundant parentheses
	}
	return "(" + strings.Join(rungs, " OR ") + ")"
}

// buildExactTemplate writes the expressions of w's shape; its slots follow
// the order of exactNumbers.
func buildExactTemplate(w *ExactWrite) *exactTemplate {
	t := &exactTemplate{names: map[string]string{}}
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
	slot := func() string {
		p := value()
		t.slots = append(t.slots, p)
		return p
	}
	constant := func(v types.AttributeValue) string {
		p := value()
		t.consts = append(t.consts, specConst{p, v})
		return p
	}
	params := func(n string, cp, ra, rp int64) []string {
		return []string{
			name(BucketAttr(n, FieldCapacity)) + " = " + constant(N(cp)),
			name(BucketAttr(n, FieldRefillAmount)) + " = " + constant(N(ra)),
			name(BucketAttr(n, FieldRefillPeriod)) + " = " + constant(N(rp)),
		}
	}
	rf := name(AttrRefill)
	var conds []string
	if !w.Full {
		conds = append(conds, rf+" = "+slot())
	}
	if w.CheckIncarnation {
		if inc := name(AttrIncarnation); w.Incarnation != 0 {
			conds = append(conds, inc+" = "+slot())
		} else {
			conds = append(conds, "attribute_not_exists("+inc+")")
		}
	}
	var set, add, remove []string
	if w.refills() {
		set = append(set, rf+" = "+slot())
	}
	if w.TTLCheck {
		ttl := name(AttrTTL)
		conds = append(conds, "(attribute_not_exists("+ttl+") OR "+ttl+" > "+slot()+")")
	}
	if w.Full {
		var tks []string
		var params [][3]int64
		for i := range w.Limits {
			if l := &w.Limits[i]; !l.Create {
				tks = append(tks, name(BucketAttr(l.Name, FieldTokens)))
				params = append(params, [3]int64{l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs})
			}
		}
		if c := &w.WCU; w.HasWCU {
			tks = append(tks, name(BucketAttr(WCULimitName, FieldTokens)))
			params = append(params, [3]int64{c.CapacityMilli, c.RefillAmountMilli, c.RefillPeriodMs})
		}
		conds = append(conds, fullLadders(rf, tks, params, rungCount(w.OldRefillMs, w.NowMs), w.NowMs, slot))
	}
	for i := range w.Limits {
		l := &w.Limits[i]
		tk, ts := name(BucketAttr(l.Name, FieldTokens)), name(BucketAttr(l.Name, FieldShadow))
		fa := name(BucketAttr(l.Name, FieldFullAt))
		if l.Create {
			conds = append(conds, "attribute_not_exists("+tk+")")
			v := slot()
			set = append(set, tk+" = "+v, ts+" = "+v)
			for _, f := range []struct {
				field string
				v     int64
			}{{FieldCapacity, l.CapacityMilli}, {FieldRefillAmount, l.RefillAmountMilli}, {FieldRefillPeriod, l.RefillPeriodMs}} {
				a := name(BucketAttr(l.Name, f.field))
				set = append(set, a+" = if_not_exists("+a+", "+constant(N(f.v))+")")
			}
			remove = append(remove, fa)
		} else {
			if !w.Full {
				conds = append(conds, tk+" = "+slot())
			}
			conds = append(conds, params(l.Name, l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs)...)
			v := slot()
			set = append(set, tk+" = "+v, ts+" = "+v)
			if sig, ok := ParamsSig(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs); ok {
				set = append(set, fa+" = "+slot(), name(BucketAttr(l.Name, FieldParams))+" = "+constant(&types.AttributeValueMemberN{Value: sig}))
			} else {
				remove = append(remove, fa)
			}
		}
		if l.TakenMilli != 0 {
			add = append(add, name(BucketAttr(l.Name, FieldTotalConsumed))+" "+slot())
		}
	}
	for _, p := range w.Params {
		conds = append(conds, params(p.Name, p.CapacityMilli, p.RefillAmountMilli, p.RefillPeriodMs)...)
	}
	if c := &w.WCU; w.HasWCU && w.Full {
		wtk := name(BucketAttr(WCULimitName, FieldTokens))
		set = append(set, wtk+" = "+slot())
		if c.TakenMilli != 0 {
			add = append(add, name(BucketAttr(WCULimitName, FieldTotalConsumed))+" "+slot())
		}
	} else if w.HasWCU {
		wtk := name(BucketAttr(WCULimitName, FieldTokens))
		add = append(add, wtk+" "+slot())
		if c.HasNeed {
			conds = append(conds, wtk+" >= "+slot())
		} else {
			conds = append(conds, "attribute_exists("+wtk+")")
		}
		if c.TakenMilli != 0 {
			add = append(add, name(BucketAttr(WCULimitName, FieldTotalConsumed))+" "+slot())
		}
	}
	if w.ID != 0 {
		for i, p := range writeIDNames {
			t.names[p] = writeIDAttrs[i]
		}
		set = append([]string{writeIDSet}, set...)
		conds = append(conds, writeIDCond)
	}
	cond, update := strings.Join(conds, " AND "), UpdateExpr(set, add, remove)
	t.cond, t.update = &cond, &update
	return t
}
