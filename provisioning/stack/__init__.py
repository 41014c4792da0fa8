"""What runs on a node: the shell scripts of the pipeline's steps and the training-stack renderer
(chosen by dotted path in ``settings.PROVISIONING_STACK_RENDERER``)."""
