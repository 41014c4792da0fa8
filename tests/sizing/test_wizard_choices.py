"""The wizard's option lists are the estimator's values (estimator/config.py), each labelled."""

from __future__ import annotations

import pytest

from portal.sizing import forms
from portal.sizing.estimator import config
from portal.sizing.recommend.strategies import BY_NAME

LISTS = [("finetune", config.FINETUNE, forms.FINETUNE_LABELS),
         ("precision", config.PRECISIONS, forms.PRECISION_LABELS),
         ("optimizer", config.OPTIMIZERS, forms.OPTIMIZER_LABELS)]


@pytest.mark.parametrize("field, values, labels", LISTS)
def test_each_estimator_value_is_a_choice_with_a_label(field, values, labels):
    lacking = set(values) - set(labels)
    assert not lacking, f"{field}: no label for {sorted(lacking)} in portal/sizing/forms.py"
    assert not set(labels) - set(values), f"{field}: labels for values the estimator does not have"
    choices = forms.WizardForm.base_fields[field].choices
    assert sorted(v for v, _ in choices) == sorted(values)
    assert all(label == labels[v] for v, label in choices)


def test_a_value_without_a_label_would_show_as_itself_last():
    assert forms.option_choices(("a", "b", "c"), {"c": "C", "a": "A"}) == [("c", "C"), ("a", "A"), ("b", "b")]


def test_the_wizards_strategies_are_the_recommenders():
    assert {v for v, _ in forms.STRATEGY_CHOICES if v} <= set(BY_NAME)
