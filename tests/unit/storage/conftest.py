"""Let pytest explain assertion failures inside the shared store contract, as it does in test modules."""

import pytest

pytest.register_assert_rewrite("tests.unit.storage.store_contract")
