package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Scenario is what a load test does. The zero value of a field means its
// default (see [Scenario.Resolve]). It is read from flags or from a YAML
// file whose keys are the JSON names below, e.g.
//
//	entities: 1000
//	hot_keys: 10
//	hot_share: 0.5
//	cascade: true
//	rpm: 600
//	tpm: 100000
//	tokens_estimate: 500
//	tokens_actual: [200, 900]
//	concurrency: 32
//	duration: 1m
type Scenario struct {
	// Resource is the resource every acquire is for.
	Resource string `json:"resource" yaml:"resource"`
	// Entities is the number of API keys (entities) traffic is spread over.
	Entities int `json:"entities" yaml:"entities"`
	// HotKeys of the entities receive HotShare (0..1) of the traffic; the
	// rest is spread uniformly over the others.
	HotKeys  int     `json:"hot_keys" yaml:"hot_keys"`
	HotShare float64 `json:"hot_share" yaml:"hot_share"`
	// Cascade makes every entity a child of one of Parents parents, with
	// Cascade on: each acquire also consumes from the parent.
	Cascade bool `json:"cascade" yaml:"cascade"`
	Parents int  `json:"parents" yaml:"parents"`
	// RPM and TPM are each entity's limits per minute. With StoredLimits
	// (implied by Cascade) they are stored as the resource's defaults and
	// the parents get ParentRPM and ParentTPM (default: the children's
	// limits times the children per parent); otherwise every acquire passes
	// them.
	RPM          int64 `json:"rpm" yaml:"rpm"`
	TPM          int64 `json:"tpm" yaml:"tpm"`
	StoredLimits bool  `json:"stored_limits" yaml:"stored_limits"`
	ParentRPM    int64 `json:"parent_rpm" yaml:"parent_rpm"`
	ParentTPM    int64 `json:"parent_tpm" yaml:"parent_tpm"`
	// TokensEstimate is the tpm each acquire takes; the lease is then
	// adjusted to a real count drawn uniformly from TokensActual [min, max].
	TokensEstimate int64    `json:"tokens_estimate" yaml:"tokens_estimate"`
	TokensActual   [2]int64 `json:"tokens_actual" yaml:"tokens_actual"`
	// Concurrency is the number of workers, each running acquire, adjust,
	// commit in a loop.
	Concurrency int `json:"concurrency" yaml:"concurrency"`
	// Duration is how long the workers run.
	Duration Duration `json:"duration" yaml:"duration"`
	// Rate, when positive, paces the acquires to this many per second over
	// all workers (open loop: when every worker is busy the run falls
	// behind, and the report shows the rate reached).
	Rate float64 `json:"rate" yaml:"rate"`
	// Speculative selects the speculative fast path (default on; see
	// NoSpeculative).
	NoSpeculative bool `json:"no_speculative" yaml:"no_speculative"`
	// Prefix starts every entity id, so that runs on one table do not
	// share buckets unless they use the same prefix.
	Prefix string `json:"prefix" yaml:"prefix"`
	// Seed seeds the choice of entities and token counts (0: random).
	Seed uint64 `json:"seed" yaml:"seed"`
}

// Duration is a time.Duration written as "30s" in YAML and JSON.
type Duration time.Duration

// MarshalJSON writes d as a string such as "30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON reads a string such as "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	v, err := time.ParseDuration(strings.Trim(string(b), `"`))
	*d = Duration(v)
	return err
}

// UnmarshalYAML reads a string such as "30s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("duration %q: %w", n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// Scenario defaults.
const (
	DefaultResource       = "gpt-4o"
	DefaultEntities       = 100
	DefaultParents        = 10
	DefaultRPM            = 1000
	DefaultTPM            = 1_000_000
	DefaultTokensEstimate = 500
	DefaultConcurrency    = 8
	DefaultDuration       = 30 * time.Second
	DefaultPrefix         = "load"
)

// LoadScenario reads a YAML scenario; unknown keys are errors.
func LoadScenario(path string) (Scenario, error) {
	var s Scenario
	data, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read scenario: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return s, fmt.Errorf("scenario %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return s, nil
}

// Resolve fills the defaults and checks the scenario.
func (s *Scenario) Resolve() error {
	setDefault(&s.Resource, DefaultResource)
	setDefault(&s.Entities, DefaultEntities)
	setDefault(&s.RPM, DefaultRPM)
	setDefault(&s.TPM, DefaultTPM)
	setDefault(&s.TokensEstimate, DefaultTokensEstimate)
	setDefault(&s.Concurrency, DefaultConcurrency)
	setDefault(&s.Duration, Duration(DefaultDuration))
	setDefault(&s.Prefix, DefaultPrefix)
	if s.TokensActual == [2]int64{} {
		s.TokensActual = [2]int64{s.TokensEstimate, s.TokensEstimate}
	}
	if !s.Cascade {
		s.Parents, s.ParentRPM, s.ParentTPM = 0, 0, 0
	}
	if s.Cascade {
		setDefault(&s.Parents, DefaultParents)
		s.StoredLimits = true
		perParent := int64((s.Entities + s.Parents - 1) / s.Parents)
		setDefault(&s.ParentRPM, s.RPM*perParent)
		setDefault(&s.ParentTPM, s.TPM*perParent)
	}
	switch {
	case s.Entities < 1:
		return errors.New("entities must be at least 1")
	case s.HotKeys < 0 || s.HotKeys > s.Entities:
		return fmt.Errorf("hot keys must be between 0 and the %d entities", s.Entities)
	case s.HotShare < 0 || s.HotShare > 1:
		return errors.New("hot share must be between 0 and 1")
	case s.HotShare > 0 && s.HotKeys == 0:
		return errors.New("a hot share needs hot keys")
	case s.Cascade && (s.Parents < 1 || s.Parents > s.Entities):
		return fmt.Errorf("parents must be between 1 and the %d entities", s.Entities)
	case s.RPM < 1 || s.TPM < 1 || (s.Cascade && (s.ParentRPM < 1 || s.ParentTPM < 1)):
		return errors.New("rpm and tpm limits must be positive")
	case s.TokensEstimate < 0 || s.TokensActual[0] < 0 || s.TokensActual[1] < s.TokensActual[0]:
		return errors.New("tokens must be non-negative, and the actual range min ≤ max")
	case s.Concurrency < 1:
		return errors.New("concurrency must be at least 1")
	case s.Duration <= 0:
		return errors.New("duration must be positive")
	case s.Rate < 0:
		return errors.New("rate must not be negative")
	}
	return nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// EntityID returns the id of entity i.
func (s *Scenario) EntityID(i int) string { return fmt.Sprintf("%s-key-%05d", s.Prefix, i) }

// ParentID returns the id of the parent of entity i (cascade only).
func (s *Scenario) ParentID(i int) string {
	return fmt.Sprintf("%s-project-%03d", s.Prefix, i%s.Parents)
}

// pick returns the index of the entity of the next acquire.
func (s *Scenario) pick(r *rand.Rand) int {
	if s.HotKeys > 0 && (s.HotKeys == s.Entities || r.Float64() < s.HotShare) {
		return r.IntN(s.HotKeys)
	}
	return s.HotKeys + r.IntN(s.Entities-s.HotKeys)
}

// actualTokens draws the real token count of an acquire.
func (s *Scenario) actualTokens(r *rand.Rand) int64 {
	lo, hi := s.TokensActual[0], s.TokensActual[1]
	if hi == lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}

// Describe returns the scenario in one line.
func (s *Scenario) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d entities", s.Entities)
	if s.HotKeys > 0 {
		fmt.Fprintf(&b, " (%d hot: %.0f%% of traffic)", s.HotKeys, s.HotShare*100)
	}
	if s.Cascade {
		fmt.Fprintf(&b, ", cascade to %d parents (rpm %d, tpm %d)", s.Parents, s.ParentRPM, s.ParentTPM)
	} else {
		b.WriteString(", no cascade")
	}
	fmt.Fprintf(&b, "; %s rpm %d tpm %d", map[bool]string{true: "stored limits", false: "limits per call"}[s.StoredLimits], s.RPM, s.TPM)
	fmt.Fprintf(&b, "; tokens estimate %d, actual %d-%d", s.TokensEstimate, s.TokensActual[0], s.TokensActual[1])
	fmt.Fprintf(&b, "; %d workers for %v", s.Concurrency, time.Duration(s.Duration))
	if s.Rate > 0 {
		fmt.Fprintf(&b, " at %.0f acquires/s", s.Rate)
	}
	if s.NoSpeculative {
		b.WriteString("; speculative writes off")
	}
	return b.String()
}
