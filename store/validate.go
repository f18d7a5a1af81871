package store

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Validation patterns (anchored with \z, so a trailing newline is
// rejected).
var (
	identifierPattern = regexp.MustCompile(`\A[a-zA-Z0-9][a-zA-Z0-9_.\-:@]*\z`)
	namePattern       = regexp.MustCompile(`\A[a-zA-Z][a-zA-Z0-9_.\-]*\z`)
	resourcePattern   = regexp.MustCompile(`\A[a-zA-Z][a-zA-Z0-9_.\-/]*\z`)
)

const (
	maxIdentifierLength = 256
	maxNameLength       = 64
)

// nameRule is one family of identifier validation: checks run in order and
// stop at the first failure.
type nameRule struct {
	kind          error // ErrInvalidIdentifier or ErrInvalidName
	maxLen        int
	reserved      string         // a value refused as reserved ("" for none)
	pattern       *regexp.Regexp // the rule as a regular expression
	chars         charClass      // the same rule, matched without the regexp engine
	patternReason string
}

// charClass is a pattern of the form \A[first][rest]*\z over ASCII: letters,
// plus digits first when firstDigit, plus digits and extra after.
type charClass struct {
	firstDigit bool
	extra      string
}

// match reports whether s matches the class (s is not empty). It agrees with
// the rule's regexp (TestCharClassMatchesPattern) at a fraction of the cost:
// validation runs on every Acquire.
func (c charClass) match(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		letter := b|0x20 >= 'a' && b|0x20 <= 'z'
		digit := b >= '0' && b <= '9'
		switch {
		case letter:
		case i == 0:
			if !(digit && c.firstDigit) {
				return false
			}
		case !digit && strings.IndexByte(c.extra, b) < 0:
			return false
		}
	}
	return true
}

var (
	identifierRule = nameRule{kind: ErrInvalidIdentifier, maxLen: maxIdentifierLength, pattern: identifierPattern,
		chars:         charClass{firstDigit: true, extra: "_.-:@"},
		patternReason: "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"}
	limitNameRule = nameRule{kind: ErrInvalidName, maxLen: maxNameLength, reserved: reservedLimitName, pattern: namePattern,
		chars:         charClass{extra: "_.-"},
		patternReason: "must start with a letter and contain only alphanumeric, underscore, hyphen, or dot characters"}
	resourceRule = nameRule{kind: ErrInvalidName, maxLen: maxNameLength, pattern: resourcePattern,
		chars:         charClass{extra: "_.-/"},
		patternReason: "must start with a letter and contain only alphanumeric, underscore, hyphen, dot, or slash characters"}
)

func (r nameRule) check(field, value string) error {
	reason := ""
	switch {
	case value == "":
		reason = "cannot be empty"
	case utf8.RuneCountInString(value) > r.maxLen:
		reason = fmt.Sprintf("exceeds maximum length of %d", r.maxLen)
	case strings.Contains(value, "#"):
		reason = "cannot contain '#' (reserved delimiter)"
	case r.reserved != "" && value == r.reserved:
		reason = fmt.Sprintf("'%s' is a reserved limit name", r.reserved)
	case !r.chars.match(value):
		reason = r.patternReason
	default:
		return nil
	}
	return NewValidationError(r.kind, field, value, reason)
}

// ValidateIdentifier checks an entity ID, parent ID or principal. The error
// is a *[ValidationError] matching [ErrInvalidIdentifier].
func ValidateIdentifier(value, field string) error { return identifierRule.check(field, value) }

// ValidateLimitName checks a limit name, the input field. The error is a
// *[ValidationError] matching [ErrInvalidName].
func ValidateLimitName(value, field string) error {
	if err := limitNameRule.check(field, value); err != nil {
		return err
	}
	if _, _, ok := ParseSlotLimitName(value); ok {
		return NewValidationError(ErrInvalidName, field, value,
			"names the limit of a generation of in-flight slots ({limit}.slots.N), which only the limiter writes")
	}
	return nil
}

// ValidateResource checks a resource name: [AllResources], or a name
// that starts with a letter. The error is a *[ValidationError] matching
// [ErrInvalidName].
func ValidateResource(value string) error {
	if value == AllResources {
		return nil
	}
	return resourceRule.check("resource", value)
}

// ValidateAcquiredResource is [ValidateChargedResource] for the resource
// an acquire names: it also refuses [AllResources], whose entity-wide
// bucket every acquire of an entity charges beside its resource's and
// which is not a resource of its own. The error is a *[ValidationError]
// matching [ErrInvalidName].
func ValidateAcquiredResource(resource string) error {
	if resource == AllResources {
		return NewValidationError(ErrInvalidName, "resource", resource,
			"names the entity-wide bucket, which every acquire of the entity charges beside its resource's: acquire on a resource")
	}
	return ValidateChargedResource(resource)
}

// ValidateChargedResource is [ValidateResource] for a resource whose
// buckets a call charges or writes (an acquire, a top-up, a reset, an
// entity's limits, LowerTokens): it also refuses the names the limiter
// derives for the buckets of calendar periods, prepaid balances and
// in-flight slots ([Limit.CalendarBucket], [Limit.PrepaidBucket],
// in-flight slots in earlier layouts): a resource whose last "/" segment is a limit
// name followed by ".balance", ".dYYYY-MM-DD", ".wYYYY-MM-DD", ".mYYYY-MM"
// or ".slots." and digits. Such a bucket is written by the limiter
// only: charged under other limits, or reset, it would refill a period's
// budget or a prepaid balance. The error is a *[ValidationError] matching
// [ErrInvalidName].
func ValidateChargedResource(resource string) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	if IsOwnBucketResource(resource) {
		return NewValidationError(ErrInvalidName, "resource", resource,
			"names the bucket of a calendar period, a prepaid balance or in-flight slots ({resource}/{limit}.balance, .dYYYY-MM-DD, .wYYYY-MM-DD, .mYYYY-MM or .slots.N), which only the limiter writes")
	}
	return nil
}

// IsOwnBucketResource reports whether resource has the form of the bucket
// resource of a calendar period, a prepaid balance or a generation of an
// in-flight limit: a resource, "/", a limit name, "." and "balance" or a
// period tag ([Limit.CalendarPeriodAt]), or ".slots." and digits.
func IsOwnBucketResource(resource string) bool {
	i := strings.LastIndexByte(resource, '/')
	if i <= 0 {
		return false
	}
	seg := resource[i+1:]
	if k := strings.LastIndex(seg, inFlightBucketInfix); k > 0 && ValidateLimitName(seg[:k], "limit") == nil {
		if gen := seg[k+len(inFlightBucketInfix):]; gen != "" && strings.Trim(gen, "0123456789") == "" {
			return true // a generation of an in-flight limit
		}
	}
	j := strings.LastIndexByte(seg, '.')
	if j <= 0 || ValidateLimitName(seg[:j], "limit") != nil {
		return false
	}
	switch tag := seg[j+1:]; {
	case tag == strings.TrimPrefix(prepaidBucketSuffix, "."):
		return true
	case len(tag) == len("d2006-01-02") && (tag[0] == 'd' || tag[0] == 'w'):
		return isDate(tag[1:], "2006-01-02")
	case len(tag) == len("m2006-01") && tag[0] == 'm':
		return isDate(tag[1:], "2006-01")
	}
	return false
}

// isDate reports whether s has the digits and dashes of layout (digits
// where layout has digits).
func isDate(s, layout string) bool {
	for k := 0; k < len(s); k++ {
		if (layout[k] == '-') != (s[k] == '-') || (s[k] != '-' && (s[k] < '0' || s[k] > '9')) {
			return false
		}
	}
	return true
}
