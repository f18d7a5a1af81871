package store

import (
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// CalendarPeriod is the calendar period of a calendar limit: a limit whose
// whole capacity is available again at the start of each period (00:00 each
// day, Monday 00:00 each week, the 1st 00:00 each month, in the limit's
// Location), with no rolling refill in between. [CalendarNone], the zero
// value, is an ordinary rolling token bucket.
type CalendarPeriod int8

// Calendar periods.
const (
	// CalendarNone is a rolling token bucket (RefillAmount every
	// RefillPeriod).
	CalendarNone CalendarPeriod = iota
	// CalendarDay resets at 00:00 every day.
	CalendarDay
	// CalendarWeek resets at 00:00 every Monday.
	CalendarWeek
	// CalendarMonth resets at 00:00 on the 1st of every month.
	CalendarMonth
)

// String returns "none", "day", "week" or "month" ("CalendarPeriod(n)" for
// an undefined value).
func (p CalendarPeriod) String() string {
	switch p {
	case CalendarNone:
		return "none"
	case CalendarDay:
		return "day"
	case CalendarWeek:
		return "week"
	case CalendarMonth:
		return "month"
	}
	return fmt.Sprintf("CalendarPeriod(%d)", int8(p))
}

// valid reports whether p is one of the defined values.
func (p CalendarPeriod) valid() bool { return p >= CalendarNone && p <= CalendarMonth }

// CalendarBucketRefillPeriod is the refill period of the bucket that holds
// one period of a calendar limit: a century, in whole seconds (100 × 365.25
// days). With a refill amount of one token it is a negligible refill, so that
// the bucket is a valid token bucket to every reader of the table (the Python
// original included) and enforces the period's budget.
const CalendarBucketRefillPeriod = 3_155_760_000 * time.Second

// Stored refill periods of calendar limits: a config item keeps a calendar
// limit with refill amount 0 and one of these negative refill periods
// (seconds), which no rolling limit can have.
const (
	StoredRefillPeriodDay   int64 = -1
	StoredRefillPeriodWeek  int64 = -2
	StoredRefillPeriodMonth int64 = -3
)

// StoredRefillPeriod returns the negative refill period code under which a
// config item stores a calendar limit of period p (0 for [CalendarNone]).
func (p CalendarPeriod) StoredRefillPeriod() int64 {
	switch p {
	case CalendarDay:
		return StoredRefillPeriodDay
	case CalendarWeek:
		return StoredRefillPeriodWeek
	case CalendarMonth:
		return StoredRefillPeriodMonth
	}
	return 0
}

// CalendarFromStoredRefillPeriod decodes a negative stored refill period
// (see [StoredRefillPeriodDay]); an unknown code is a *[ValidationError]
// matching [ErrValidation].
func CalendarFromStoredRefillPeriod(seconds int64) (CalendarPeriod, error) {
	switch seconds {
	case StoredRefillPeriodDay:
		return CalendarDay, nil
	case StoredRefillPeriodWeek:
		return CalendarWeek, nil
	case StoredRefillPeriodMonth:
		return CalendarMonth, nil
	}
	return CalendarNone, NewValidationError(ErrValidation, "refill_period", fmt.Sprint(seconds),
		"unknown calendar period code (-1 day, -2 week, -3 month)")
}

// locations caches the locations loaded by [LoadCalendarLocation] by name,
// so that configs read back hold the same *time.Location for one zone.
var locations sync.Map // string → *time.Location

// LoadCalendarLocation returns the location of a stored calendar limit's
// time zone: nil for "" and "UTC" (a nil Location is UTC), else
// time.LoadLocation(name), cached, so that every call with one name returns
// the same pointer. An unknown zone is a *[ValidationError].
func LoadCalendarLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return nil, nil
	}
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, NewValidationError(ErrValidation, "location", name, "unknown time zone: "+err.Error())
	}
	actual, _ := locations.LoadOrStore(name, loc)
	return actual.(*time.Location), nil
}

// LocationName returns the IANA name under which a calendar limit's
// location is stored: "" for UTC (nil, or a location named "UTC").
func (l Limit) LocationName() string {
	if l.Location == nil || l.Location.String() == "UTC" {
		return ""
	}
	return l.Location.String()
}

// InLocation returns a copy of l whose calendar periods start at 00:00 in
// loc (nil, or time.UTC, is UTC, the default); daylight saving time is
// followed. Only calendar limits take a location. To be stored (SetLimits
// and the defaults) loc must be loadable by its name with time.LoadLocation,
// as the zones of the IANA database are.
func (l Limit) InLocation(loc *time.Location) Limit {
	if loc == time.UTC {
		loc = nil
	}
	l.Location = loc
	return l
}

// IsCalendar reports whether l is a calendar limit.
func (l Limit) IsCalendar() bool { return l.Calendar != CalendarNone }

// location returns l's location, UTC for nil.
func (l Limit) location() *time.Location {
	if l.Location == nil {
		return time.UTC
	}
	return l.Location
}

// CalendarPeriodAt returns the period of calendar limit l that contains t:
// its start and the start of the next period, and its tag ("d2026-11-28"
// for a day, "w2026-11-23" for the week starting on Monday 2026-11-23,
// "m2026-11" for a month), computed in l's location. A period starts at
// the first instant whose local date is its first day: 00:00, or, where
// daylight saving time skips midnight (America/Santiago on 2026-09-06),
// the end of the skipped hour (01:00). For a rolling limit it returns zero
// times and "".
func (l Limit) CalendarPeriodAt(t time.Time) (start, next time.Time, tag string) {
	loc := l.location()
	lt := t.In(loc)
	y, m, d := lt.Date()
	switch l.Calendar {
	case CalendarDay:
		start = localDayStart(y, m, d, loc)
		next = localDayStart(y, m, d+1, loc)
		tag = "d" + start.In(loc).Format("2006-01-02")
	case CalendarWeek:
		back := (int(lt.Weekday()) + 6) % 7 // days since Monday
		start = localDayStart(y, m, d-back, loc)
		next = localDayStart(y, m, d-back+7, loc)
		tag = "w" + start.In(loc).Format("2006-01-02")
	case CalendarMonth:
		start = localDayStart(y, m, 1, loc)
		next = localDayStart(y, m+1, 1, loc)
		tag = "m" + start.In(loc).Format("2006-01")
	default:
		return time.Time{}, time.Time{}, ""
	}
	return start, next, tag
}

// localDayStart returns the first instant whose date in loc is the day
// y-m-d (normalised as time.Date does: day 32 of a month is the 1st of
// the next). That is local midnight on every day whose midnight exists,
// the earlier of two midnights when a clock set back repeats it, and the
// end of the gap when daylight saving time skips midnight, where
// time.Date(y, m, d, 0, 0, 0, 0, loc) answers an instant of the day
// before (23:00).
func localDayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date()
	want := y*10000 + int(m)*100 + d
	dateOf := func(t time.Time) int {
		ty, tm, td := t.In(loc).Date()
		return ty*10000 + int(tm)*100 + td
	}
	c := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if dateOf(c) == want && dateOf(c.Add(-time.Second)) < want {
		return c // the common case: midnight exists once
	}
	// Search the first second whose local date is the day: offsets change
	// by less than a day, so it lies within a day of c; zone transitions
	// fall on whole seconds.
	lo, hi := c.Add(-36*time.Hour).Unix(), c.Add(36*time.Hour).Unix() // dateOf(lo) < want ≤ dateOf(hi)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if dateOf(time.Unix(mid, 0)) < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Unix(hi, 0).In(c.Location())
}

// CalendarBucket returns the bucket resource that holds the period of
// calendar limit l containing now on resource: resource + "/" + l.Name +
// "." + tag (see [Limit.CalendarPeriodAt]), and the start of the next
// period. A derived name longer than a resource name may be is a
// *[ValidationError] naming the limit and the resource.
func (l Limit) CalendarBucket(resource string, now time.Time) (bucketResource string, next time.Time, err error) {
	_, next, tag := l.CalendarPeriodAt(now)
	bucketResource = resource + "/" + l.Name + "." + tag
	if utf8.RuneCountInString(bucketResource) > maxNameLength {
		return "", next, NewValidationError(ErrInvalidName, "resource", resource,
			fmt.Sprintf("calendar limit %q on resource %q: its period bucket %q exceeds the maximum resource length of %d",
				l.Name, resource, bucketResource, maxNameLength))
	}
	return bucketResource, next, nil
}

// CalendarBucketLimit returns the ordinary limit of the bucket that holds
// one period of calendar limit l: l's name and capacity, one token refilled
// every [CalendarBucketRefillPeriod].
func (l Limit) CalendarBucketLimit() Limit {
	return Limit{Name: l.Name, Capacity: l.Capacity, RefillAmount: 1, RefillPeriod: CalendarBucketRefillPeriod}
}

// IsPeriodBucket reports whether l is the limit of a calendar period's
// bucket ([Limit.CalendarBucketLimit]): one token refilled every
// [CalendarBucketRefillPeriod], not prepaid.
func (l Limit) IsPeriodBucket() bool {
	return !l.Prepaid && l.Calendar == CalendarNone && l.RefillAmount == 1 && l.RefillPeriod == CalendarBucketRefillPeriod
}

// String formats l as fmt's %v shows a struct: "{rpm 100 100 1m0s}" (name,
// capacity, refill amount and period) for a rolling limit, and "{usd 1000
// month}" or "{usd 1000 month America/New_York}" (name, capacity, period
// and, unless UTC, zone) for a calendar limit, and "{usd 1000 prepaid}"
// (name, capacity) for a prepaid limit, and "{calls 8 in-flight}" (name,
// slots) for an in-flight limit.
func (l Limit) String() string {
	if l.InFlight {
		return fmt.Sprintf("{%s %d in-flight}", l.Name, l.Capacity)
	}
	if l.Prepaid {
		return fmt.Sprintf("{%s %d prepaid}", l.Name, l.Capacity)
	}
	if l.Calendar == CalendarNone {
		if l.Location != nil {
			return fmt.Sprintf("{%s %d %d %v %s}", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod, l.Location)
		}
		return fmt.Sprintf("{%s %d %d %v}", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod)
	}
	if tz := l.LocationName(); tz != "" {
		return fmt.Sprintf("{%s %d %s %s}", l.Name, l.Capacity, l.Calendar, tz)
	}
	return fmt.Sprintf("{%s %d %s}", l.Name, l.Capacity, l.Calendar)
}
