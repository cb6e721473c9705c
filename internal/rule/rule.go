// Package rule is the form in which a component reports a broken rule of
// its configuration: the fields of its Config the rule relates, each with
// its value, and the rule's text around them.
//
// Each component (elect/decide, group, apphealth, podlabel) owns its rules
// and checks them in its Config's Validate, in its own terms:
//
//	decide: renewDeadline (2s) must be greater than 1.2 × retryPeriod (3s)
//
// internal/config, which maps environment variables to those Configs,
// renders the same *Error with the variables' names instead, so that a rule
// is written once and every setting it relates is named in the message:
//
//	LEASEHOLD_RENEW_DEADLINE=2s must be greater than 1.2 × LEASEHOLD_RETRY_PERIOD=3s
package rule

import (
	"fmt"
	"strings"
)

// Field is one setting a rule relates, as its component's Config has it.
type Field struct {
	// Name is the field's name in the component's Config, e.g.
	// "RenewDeadline": what a caller maps to its own name for the setting.
	Name string
	// Label is how the component's own message calls it, e.g.
	// "renewDeadline"; empty shows the value alone (a URL, a label key).
	Label string
	// Value is the field's value: a string is shown quoted, anything else
	// with %v (a time.Duration as "2s").
	Value any
}

// ShowValue formats v as an *Error shows a value: a string quoted, anything
// else with %v.
func ShowValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// String shows f in its component's terms: "renewDeadline (2s)",
// `key "a b"` for a string, or the value alone without a Label.
func (f Field) String() string {
	switch _, isString := f.Value.(string); {
	case f.Label == "":
		return ShowValue(f.Value)
	case isString:
		return f.Label + " " + ShowValue(f.Value)
	default:
		return f.Label + " (" + ShowValue(f.Value) + ")"
	}
}

// Error is a broken rule of a component's Config. Its Error method shows
// the fields in the component's terms (Field.String); Text shows them as a
// caller names them.
type Error struct {
	// Component is the reporting package, e.g. "decide": the prefix of
	// Error().
	Component string
	// Fields are the settings the rule relates, in the order its text names
	// them; the first is the one the rule is about.
	Fields []Field

	format string
	args   []any // Field values stand for Fields
}

// Errorf returns the *Error of component whose text is format with args:
// each Field among args (use %s) is one of the settings the rule relates;
// other args are formatted as they are.
func Errorf(component, format string, args ...any) *Error {
	e := &Error{Component: component, format: format, args: args}
	for _, a := range args {
		if f, ok := a.(Field); ok {
			e.Fields = append(e.Fields, f)
		}
	}
	return e
}

// Text returns the rule's text with every field shown by show.
func (e *Error) Text(show func(Field) string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if f, ok := a.(Field); ok {
			a = show(f)
		}
		args[i] = a
	}
	return fmt.Sprintf(e.format, args...)
}

// Error returns "<component>: <text>", the fields in the component's terms,
// on one line.
func (e *Error) Error() string {
	return e.Component + ": " + oneLine(e.Text(Field.String))
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
