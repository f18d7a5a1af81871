package main

// The manifest's dollar shorthand: usd_per_day, usd_per_week or
// usd_per_month beside a level's limits declares the calendar limit "usd"
// of that many dollars a period, counted in micro-dollars (the unit of
// llmhttp.USD), in UTC:
//
//	resources:
//	  gpt-4o:
//	    usd_per_month: 500
//	    limits:
//	      rpm: {capacity: 600}

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/store"
)

// usdLimitName is the name of the limit the dollar shorthand declares.
const usdLimitName = "usd"

// manifestUSD is the dollar shorthand of one limits level; at most one of
// its fields may be given.
type manifestUSD struct {
	USDPerDay   *dollars `yaml:"usd_per_day"`
	USDPerWeek  *dollars `yaml:"usd_per_week"`
	USDPerMonth *dollars `yaml:"usd_per_month"`
}

// dollars is an amount of dollars as the manifest spells it (a YAML
// scalar such as 500 or 0.45), kept as text so that no decimal passes
// through a float.
type dollars struct{ text string }

// UnmarshalYAML keeps the scalar's text; anything else is an error.
func (d *dollars) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a dollar amount must be a number, e.g. 500 or 0.45", n.Line)
	}
	d.text = n.Value
	return nil
}

// given returns the shorthand's keys that are set, with their amounts and
// calendar periods, in the order day, week, month.
func (u manifestUSD) given() (keys []string, amounts []*dollars, periods []store.CalendarPeriod) {
	for _, f := range []struct {
		key string
		d   *dollars
		p   store.CalendarPeriod
	}{{"usd_per_day", u.USDPerDay, store.CalendarDay}, {"usd_per_week", u.USDPerWeek, store.CalendarWeek},
		{"usd_per_month", u.USDPerMonth, store.CalendarMonth}} {
		if f.d != nil {
			keys, amounts, periods = append(keys, f.key), append(amounts, f.d), append(periods, f.p)
		}
	}
	return keys, amounts, periods
}

// key returns the key of the shorthand given ("" when none).
func (u manifestUSD) key() string {
	keys, _, _ := u.given()
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// limit returns the calendar limit the shorthand of level path declares;
// ok is false when it declares none.
func (u manifestUSD) limit(path string) (l limiter.Limit, ok bool, err error) {
	keys, amounts, periods := u.given()
	switch len(keys) {
	case 0:
		return limiter.Limit{}, false, nil
	case 1:
	default:
		return limiter.Limit{}, false, fmt.Errorf("invalid manifest: %s: %s: one dollar budget per level (each declares the limit %s); "+
			"declare further budgets as calendar limits under other names", path, strings.Join(keys, " and "), usdLimitName)
	}
	micros, err := parseDollars(amounts[0].text)
	if err != nil {
		return limiter.Limit{}, false, fmt.Errorf("invalid manifest: %s.%s: %v", path, keys[0], err)
	}
	l = limiter.Limit{Name: usdLimitName, Capacity: micros, Calendar: periods[0]}
	if err := l.Validate(); err != nil {
		return limiter.Limit{}, false, fmt.Errorf("invalid manifest: %s.%s: %v", path, keys[0], err)
	}
	return l, true, nil
}

// maxDollars bounds the amounts parseDollars accepts: their micro-dollars
// must fit a limit's capacity (int64 millitokens).
const maxDollars = math.MaxInt64 / 1000 / llmhttp.USD

// parseDollars parses a positive decimal number of dollars with at most six
// decimals ("500", "0.45", "12.000001") into micro-dollars.
func parseDollars(s string) (int64, error) {
	bad := fmt.Errorf("%q is not an amount of dollars: use a positive number with at most 6 decimals, e.g. 500 or 0.45", s)
	whole, frac, hasFrac := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" {
		whole = "0"
	}
	if strings.ContainsAny(whole, "+-_") || (hasFrac && (frac == "" || len(frac) > 6 || strings.ContainsAny(frac, "+-_"))) {
		return 0, bad
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, bad
	}
	if w > maxDollars {
		return 0, fmt.Errorf("%s dollars is more than a limit can hold (%d)", s, maxDollars)
	}
	var f int64
	if hasFrac {
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, bad
		}
	}
	micros := w*llmhttp.USD + f
	if micros <= 0 {
		return 0, fmt.Errorf("%s dollars: a budget must be positive", s)
	}
	return micros, nil
}

// formatDollars formats micro-dollars as dollars: "$500", "$0.45",
// "$12.000001", "-$3.50".
func formatDollars(micros int64) string {
	sign := ""
	u := uint64(micros)
	if micros < 0 {
		sign, u = "-", uint64(-(micros+1))+1
	}
	whole, frac := u/uint64(llmhttp.USD), u%uint64(llmhttp.USD)
	s := sign + "$" + thousands(int64(whole))
	if frac != 0 {
		f := strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
		if len(f) < 2 {
			f += "0"
		}
		s += "." + f
	}
	return s
}
