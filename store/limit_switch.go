package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// LimitSwitch records that limit Name of a config of defaults changed
// kind (rolling, calendar, prepaid), calendar period or zone at AtMs: the
// limit then moved to other buckets (a rolling limit lives in the entity's
// bucket, a calendar limit in the bucket of each period of its zone).
// Every entity that inherits the config still has what the old definition
// spent in the old buckets; the limiter carries that spend into the new
// definition's bucket of the period containing AtMs when an acquire first
// creates it.
type LimitSwitch struct {
	// Name is the limit's name.
	Name string
	// Resource scopes the record to the entities' buckets of one resource
	// ("" for every resource the config applies to): a system config
	// holds the switches of a resource whose deleted defaults gave way to
	// it.
	Resource string
	// Entity scopes the record to one entity ("" for every entity that
	// inherits the config): a system config holds the switches of an
	// entity whose deleted DefaultResource config gave way to the
	// resources' defaults, whichever level they come from.
	Entity string
	// From is the definition in force until AtMs, unless Inherited.
	From Limit
	// Inherited means that the definition in force until AtMs was the
	// one the levels after the config give (an entity's DefaultResource
	// config set where there was none: each resource's defaults, else the
	// system's); From is then unset.
	Inherited bool
	// AtMs is the instant of the change (epoch ms).
	AtMs int64
}

// storedSwitch is a LimitSwitch as [EncodeLimitSwitches] stores it.
type storedSwitch struct {
	Name      string `json:"n"`
	Resource  string `json:"r,omitempty"`
	Entity    string `json:"e,omitempty"`
	AtMs      int64  `json:"at"`
	Inherited bool   `json:"inh,omitempty"`
	Capacity  int64  `json:"cp,omitempty"`
	Refill    int64  `json:"ra,omitempty"`
	PeriodNs  int64  `json:"rp,omitempty"`
	Calendar  int8   `json:"cal,omitempty"`
	TimeZone  string `json:"tz,omitempty"`
	Prepaid   bool   `json:"pp,omitempty"`
	InFlight  bool   `json:"if,omitempty"`
}

// EncodeLimitSwitches returns the stored form of switches: a JSON array,
// "" for none.
func EncodeLimitSwitches(switches []LimitSwitch) (string, error) {
	if len(switches) == 0 {
		return "", nil
	}
	out := make([]storedSwitch, len(switches))
	for i, s := range switches {
		l := s.From
		out[i] = storedSwitch{Name: s.Name, Resource: s.Resource, Entity: s.Entity, AtMs: s.AtMs, Inherited: s.Inherited,
			Capacity: l.Capacity, Refill: l.RefillAmount, PeriodNs: int64(l.RefillPeriod), Calendar: int8(l.Calendar),
			TimeZone: l.LocationName(), Prepaid: l.Prepaid, InFlight: l.InFlight}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// DecodeLimitSwitches reads the stored form of [EncodeLimitSwitches] ("":
// none). A malformed record is an error.
func DecodeLimitSwitches(raw string) ([]LimitSwitch, error) {
	if raw == "" {
		return nil, nil
	}
	var in []storedSwitch
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return nil, fmt.Errorf("limit switches: %w", err)
	}
	out := make([]LimitSwitch, len(in))
	for i, s := range in {
		out[i] = LimitSwitch{Name: s.Name, Resource: s.Resource, Entity: s.Entity, AtMs: s.AtMs, Inherited: s.Inherited}
		if s.Inherited {
			continue
		}
		loc, err := LoadCalendarLocation(s.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("limit switch %s: %w", s.Name, err)
		}
		out[i].From = Limit{Name: s.Name, Capacity: s.Capacity, RefillAmount: s.Refill, RefillPeriod: time.Duration(s.PeriodNs),
			Calendar: CalendarPeriod(s.Calendar), Location: loc, Prepaid: s.Prepaid, InFlight: s.InFlight}
	}
	return out, nil
}
