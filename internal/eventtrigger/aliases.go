package eventtrigger

import "github.com/larkrun/lark/internal/trigger"

// 002 writes an event trigger with its own member names. The spec README maps only 002's older id
// family and definition_id onto 000, so Lark takes 002's names as aliases of its own
// (docs/events.md, "002's member names"): filter is event_filter_query and enabled is status
// (true: active, false: disabled, as :disable sets). An alias and the member it stands for may both
// be sent only when they agree.

// aliases folds 002's members into Lark's.
func (spec *Spec) aliases() error {
	if spec.Filter != "" {
		if spec.EventFilterQuery != "" && spec.EventFilterQuery != spec.Filter {
			return invalid("$.filter", "INVALID_VALUE", "filter (002's name of event_filter_query) disagrees with event_filter_query; send one of them")
		}
		spec.EventFilterQuery, spec.Filter = spec.Filter, ""
	}
	if spec.Enabled != nil {
		st := string(trigger.StatusDisabled)
		if *spec.Enabled {
			st = string(trigger.StatusActive)
		}
		if spec.Status != "" && spec.Status != st {
			return invalid("$.enabled", "INVALID_VALUE", "enabled (002's name of status) is %t but status is %q; send one of them", *spec.Enabled, spec.Status)
		}
		spec.Status, spec.Enabled = st, nil
	}
	return nil
}

// patchAliases renames 002's members of a merge patch to Lark's before it is merged into the
// current trigger, so that they replace what they stand for. A patch that sends both keeps both,
// for aliases to compare.
func patchAliases(patch map[string]any) map[string]any {
	out := make(map[string]any, len(patch))
	for k, v := range patch {
		out[k] = v
	}
	if v, ok := out["filter"]; ok && v != nil {
		if _, both := out["event_filter_query"]; !both {
			out["event_filter_query"] = v
			delete(out, "filter")
		}
	}
	if v, ok := out["enabled"].(bool); ok {
		if _, both := out["status"]; !both {
			out["status"] = string(trigger.StatusDisabled)
			if v {
				out["status"] = string(trigger.StatusActive)
			}
			delete(out, "enabled")
		}
	}
	return out
}
