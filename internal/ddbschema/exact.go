package ddbschema

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
// its balance is at least NeedMilli (when HasNeed).
type ExactWCU struct {
	DeltaMilli, TakenMilli, NeedMilli int64
	HasNeed                           bool
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
	dst = append(dst, w.OldRefillMs)
	if w.CheckIncarnation && w.Incarnation != 0 {
		dst = append(dst, w.Incarnation)
	}
	if w.refills() {
		dst = append(dst, w.NewRefillMs)
	}
	if w.TTLCheck {
		dst = append(dst, floorDiv(w.NowMs, 1000))
	}
	for i := range w.Limits {
		l := &w.Limits[i]
		if !l.Create {
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
	if c := &w.WCU; w.HasWCU {
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
	conds := []string{rf + " = " + slot()}
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
			conds = append(conds, tk+" = "+slot())
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
	if c := &w.WCU; w.HasWCU {
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
