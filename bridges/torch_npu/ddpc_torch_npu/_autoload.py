"""torch's `torch.backends` entry point (pyproject.toml), called at the end of
`import torch` as torch_npu's is: importing this module imported the package,
which did the registering."""


def load():
    """Nothing left to do: importing this module imported ddpc_torch_npu."""
